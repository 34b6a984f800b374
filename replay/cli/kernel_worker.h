// The kernel worker: the only bbreplay process that loads a backend's code. Its reference worker
// (replay/workers/remote_kernel.h) starts it, isolated (replay/workers/isolation.h), and asks it, over the socket on
// descriptor kChannelFd, to allocate a call's arguments (which the reference fills from its own
// memory), to run the kernel on them (watched, poisoned, timed), to describe the results and the
// arguments after the call (which the reference reads from this process's memory and judges), and after
// each case to check what a kernel could have changed in this process (replay/workers/tamper.h). It holds no
// secret, no native result and no report: what it says is evidence to be checked, never a verdict.
#pragma once

namespace bb::replay {

inline constexpr int kChannelFd = 3;
inline constexpr int kInboxFd = 4;  // a memfd the reference writes each call's host inputs into

// `bbreplay --worker-kernel`: serves its reference until the channel closes.
int kernel_worker_main();

}  // namespace bb::replay
