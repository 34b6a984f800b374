// What the tracer does with CUDA when this build has it (tracer/cuda_support.cpp), and the inert
// stand-ins otherwise (tracer/no_cuda_support.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "tracer/devtime/collector.h"
#include "tracer/devtime/cupti_session.h"

namespace bb::tracer {

// Registers the value-range probe for CUDA integer tensors.
void install_cuda_support();

// "NVIDIA H200" for "cuda:0"; "" when unknown or not a CUDA device.
std::string device_name(const std::string& device);

// Folds finished range probes into their stores. Never blocks, except that with `final` it waits up
// to 200 ms for probes still in flight (the program is ending); unfinished ones are dropped.
void collect_device_ranges(bool final);

// Range probes dropped because they had not finished when the trace was last written at exit.
unsigned long dropped_device_ranges();

struct DeviceTimingOptions {
  bool enabled = true;                   // BB_DEVICE_TIME
  bool timeline = false;                 // keep events for BB_TIMELINE
  size_t timeline_max_events = 1000000;  // per kind
  std::string torch_lib_dir;             // where to look for torch's libcupti when none is loaded
  bool first_calls = true;               // each signature's first calls (the default); false: every call
  bool first_calls_asked = false;        // BB_DEVICE_TIME=first itself: say so where it cannot be had
  uint32_t calls = 5;                    // BB_DEVICE_TIME_CALLS: timed calls wanted per signature
  uint32_t refresh_ms = 10000;           // BB_DEVICE_TIME_REFRESH: one more of each this often (0: never)
  uint32_t sample_on_ms = 0;             // BB_DEVICE_TIME_SAMPLE=ON/PERIOD: record ON ms of every
  uint32_t sample_period_ms = 0;         // PERIOD ms (0: no windows)
};
// Call before install_cuda_support(). Timing starts when an op first uses a CUDA device.
void configure_device_timing(const DeviceTimingOptions& options);

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
