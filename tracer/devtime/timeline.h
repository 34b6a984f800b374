// Chrome-trace / Perfetto JSON of a traced run, in the shape torch.profiler's export has, so the
// viewers and scripts made for that (chrome://tracing, ui.perfetto.dev, HTA) read it unchanged:
// ops as `cpu_op` slices on their host threads, launch calls as `cuda_runtime` / `cuda_driver`,
// kernels, copies and sets as `kernel` / `gpu_memcpy` / `gpu_memset` on GPU streams (pid = device,
// tid = stream), launch -> kernel flow arrows (`ac2g`), and the keys `External id`, `correlation`,
// `Input Dims`, `Input type`, `device`, `stream`, `grid`, `block`. No torch, no CUPTI.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "tracer/devtime/collector.h"

namespace bb::devtime {

struct OpLabel {
  std::string name;         // aten::add
  std::string input_dims;   // JSON array, e.g. [[2, 3], [2, 3], []]
  std::string input_types;  // JSON array, e.g. ["float", "float", "Scalar"]
};

struct TimelineInfo {
  int64_t pid = 0;
  std::string trace_name;  // shown by viewers; the program's command line
  // The label of a signature; null when unknown (the op is written by its id only).
  std::function<const OpLabel*(uint32_t sig)> label;
};

// Writes the events as JSON. Timestamps are µs after the earliest event (baseTimeNanoseconds).
void write_timeline(std::ostream& out, const Collector::Timeline& events, const TimelineInfo& info);

}  // namespace bb::devtime
