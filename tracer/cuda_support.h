// What the tracer does with CUDA when this build has it (tracer/cuda_support.cpp), and the inert
// stand-ins otherwise (tracer/no_cuda_support.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "tracer/device_timing_options.h"
#include "tracer/devtime/collector.h"
#include "tracer/devtime/cupti_session.h"

namespace bb::tracer {

// Registers the value-range probe for CUDA integer tensors and device timing with `timing`, which
// starts when an op first uses a CUDA device. After start_tracing; once per process (a later call
// changes nothing). keep_timeline: keep events for a timeline file (BB_TIMELINE, with timing on);
// torch_lib_dir: where to look for torch's libcupti when none is loaded.
void install_cuda_support(const DeviceTimingOptions& timing, bool keep_timeline, const std::string& torch_lib_dir);

// "NVIDIA H200" for "cuda:0"; "" when unknown or not a CUDA device.
std::string device_name(const std::string& device);

// Folds finished range probes into their stores. Never blocks, except that with `final` it waits up
// to 200 ms for probes still in flight (the program is ending); unfinished ones are dropped.
void collect_device_ranges(bool final);

// Range probes dropped because they had not finished when the trace was last written at exit.
unsigned long dropped_device_ranges();

// True while device timing ties launches to ops (every call, or a window open): sampled tracing must
// then see every call.
bool device_timing_needs_every_call();

struct DeviceTimeSnapshot {
  std::string status;  // on | off: why | stopped: why
  std::map<uint32_t, devtime::SignatureTime> by_signature;
  devtime::Health health;
  std::string mode;               // all | first-calls | windows (devtime::Sampling)
  std::string sampled;            // "10 ms of every 100 ms", "first 5 calls of each signature, ..."; empty: every call
  uint64_t windows = 0;           // sampled: windows opened
  uint64_t detaches = 0;          // sampled: gaps between windows with CUPTI detached
  uint64_t control_ns = 0;        // sampled: spent attaching and detaching CUPTI
  uint64_t signatures_short = 0;  // first-calls: signatures that want more timed calls now
  std::vector<devtime::WindowEvent> events;  // sampled: windows opened and closed, detaches
};
// Collects finished records first (not after the final collection at exit).
DeviceTimeSnapshot device_time_snapshot();
devtime::Collector::Timeline device_timeline();

// In a forked child: CUPTI is never called again (a flush there hung for >15 s).
void forget_device_timing();

}  // namespace bb::tracer
