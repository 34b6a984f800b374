// The CuptiApi of the process's own libcupti (built only where CUPTI's headers are found).
#pragma once

#include <memory>
#include <string>

#include "tracer/devtime/cupti_session.h"

namespace bb::devtime {

// How launches are tied to ops (tried on an H200 with CUDA 13, docs/performance.md):
//   Callback     (default) a callback on the launch calls (callback API) reads this thread's op stack
//                and records launch correlation id -> op; no API records. Holds CUPTI's one
//                subscriber slot, given up when another client subscribes.
//   ExternalAll  an external correlation id (kind CUSTOM2) pushed per op, with API records enabled
//                for all calls and then disabled for all but the launch calls (enabling only the
//                launch calls per callback id produced no API records, hence no correlation).
//                Needs no subscriber; its cost against Callback is not settled (docs/performance.md).
//   KernelsOnly  device records only, nothing attributed: what CUPTI's tracing itself costs.
//   Watch        device records, plus every launch call and every call that changes the device's
//                environment (limits, L2 persistence, cache config, stream attributes) reported to a
//                listener as it is made: bbreplay's integrity checks.
enum class CuptiMode { Callback, ExternalAll, KernelsOnly, Watch };

// A call seen in Watch mode, at its entry.
struct WatchedCall {
  bool launch = false;  // a kernel launch, copy or set; otherwise an environment change
  std::string name;     // environment changes only: cudaDeviceSetLimit, cuStreamSetAttribute, ...
  uint32_t correlation = 0;
  uint32_t thread = 0;  // gettid() of the calling thread
  uint64_t time = 0;    // CUPTI's clock
};
using CallListener = void (*)(const WatchedCall& call, void* user);

// Null, with the reason in `why`, when no usable libcupti is found. `torch_lib_dir` is searched for the
// copy torch's wheel ships when none is loaded yet.
// `listener`: Watch mode only (called from the calling thread; must not throw).
std::unique_ptr<CuptiApi> make_real_cupti(const std::string& torch_lib_dir, CuptiMode mode, bool timeline,
                                          std::string* why, CallListener listener = nullptr, void* user = nullptr);

// Callback mode: `inside_op` says whether the calling thread is inside an op call (the tracer's view;
// must not throw, and is called from inside CUDA's launch calls). Set before timing starts, it lets
// sampled timing leave calls that begin between windows unfollowed (CuptiApi::links_untracked).
void set_op_probe(bool (*inside_op)());

// CUPTI's activity buffers from now on: `bytes` each (8 MiB unless set), and up to `keep` of them kept for
// reuse once CUPTI hands them back (0: each freed). A reused buffer's pages are already mapped: a fresh
// one's are faulted in by CUPTI inside whatever launch asked for it.
void set_activity_buffers(size_t bytes, size_t keep);

}  // namespace bb::devtime
