// The CuptiApi of the process's own libcupti (built only where CUPTI's headers are found).
#pragma once

#include <memory>
#include <string>

#include "tracer/device_timer.h"

namespace bb::devtime {

// How launches are tied to ops (measured on an H200 with CUDA 13, docs/performance.md):
//   Callback     (default) a callback on the launch calls (callback API) reads this thread's op stack
//                and records launch correlation id -> op; no API records. Holds CUPTI's one
//                subscriber slot, given up when another client subscribes.
//   ExternalAll  an external correlation id (kind CUSTOM2) pushed per op, with API records enabled
//                for all calls and then disabled for all but the launch calls (enabling only the
//                launch calls per callback id produced no API records, hence no correlation).
//                Several times the cost per op; kept for comparison.
//   KernelsOnly  device records only, nothing attributed: what CUPTI's tracing itself costs.
enum class CuptiMode { Callback, ExternalAll, KernelsOnly };

// Null, with the reason in `why`, when no usable libcupti is found. `torch_lib_dir` is searched for the
// copy torch's wheel ships when none is loaded yet.
std::unique_ptr<CuptiApi> make_real_cupti(const std::string& torch_lib_dir, CuptiMode mode, bool timeline,
                                          std::string* why);

}  // namespace bb::devtime
