// Host-timed runs of a kernel checked against clocks outside its process (bbreplay's reference worker
// reads them; docs/integrity.md, "Who runs what"): a time the kernel's process reports cannot be much
// shorter than the CPU time its calling thread spent meanwhile (by the OS's account), nor than the
// reference's own clock around the request. What a run costs beyond the call itself (waking, reading the
// request, answering: on a virtual machine tens of µs, and noisy) is measured by a "dry" run of nothing
// made the same way right after each real one. Pure functions, tested without a process.
#pragma once

#include <string>
#include <vector>

namespace bb::verify {

// One timed run: the time the kernel's process reported; the reference's clock from the request to the
// first reply, less the time the kernel's calling thread and the reference's waited for a CPU meanwhile
// (a busy machine); the time the kernel's calling thread was on a CPU or waiting for one (runnable) over
// that window, by the OS's account (negative: unknown).
struct OutsideRun {
  double reported_us = 0, wall_us = 0, thread_us = -1;
};

// Allowances: what the excess may reach before it is a disagreement, beyond these and 10 % of the
// reported median. Waking a thread and answering a request cost 35-60 µs of thread CPU on the 2-core
// development VM, ±10-20 µs from one run to the next (what the kernel worker's own clock saw of the same
// path: 8-10 µs); on a bare host a few µs. In-place updates of 10-20 MB inside a whole trace (resnet50's
// lerp_, zero_, addcdiv_, native against native) showed 68-82 µs on the thread on runs of 310-550 µs,
// on every run and on reruns within the same replay (a cause not found): 5 % accused them.
inline constexpr double kThreadSlackUs = 50, kWallSlackUs = 100;

// "" when the reported times agree with both outside clocks, else why not. A run's excess is what the
// outside clock saw beyond the time reported; the dry runs (of nothing, made the same way between the
// runs) show the excess of the path around a call. On the thread, the lower quartile of the runs'
// excesses, less the lower quartile of the dry runs', is judged: a busy machine only adds to either (a
// wait for a CPU, an interrupt), so each stays near its floor while a clock wound back on every run lifts
// every run's. (Each run less the dry run beside it, then the lower quartile, let noise on the dry runs
// alone hide a theft: on the 2-core VM under load, a clock wound back 120 us a run cleared one set of
// twelve runs in two, 2026-12-07.) On the wall, whose excess also moves down (the waits taken off it),
// each run less the dry run beside it, on the lower quartile: judged each side alone, it accused native's
// two-threaded relu of 1.5 ms a run under two CPU hogs. Three of each at least.
std::string clock_disagreement(const std::vector<OutsideRun>& runs, const std::vector<OutsideRun>& dry);

}  // namespace bb::verify
