// Device timing's options (install_cuda_support, tracer/cuda_support.h), apart from it so that the
// preload's settings (shim/config.h) hold them without including CUDA's or CUPTI's headers. They
// become devtime::Sampling when an op first uses a CUDA device.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bb::tracer {

struct DeviceTimingOptions {
  bool enabled = true;                   // BB_DEVICE_TIME=0 turns CUPTI device timing off
  bool first_calls = true;               // each signature's first calls (the default); BB_DEVICE_TIME=all: every call
  bool first_calls_asked = false;        // BB_DEVICE_TIME=first itself: say so where it cannot be had
  uint32_t calls = 5;                    // BB_DEVICE_TIME_CALLS: timed calls wanted per signature
  double refresh_s = 10.0;               // BB_DEVICE_TIME_REFRESH: one more of each this often (s); 0: never
  uint32_t sample_on_ms = 0;             // BB_DEVICE_TIME_SAMPLE=ON/PERIOD (ms): record ON ms of every
  uint32_t sample_period_ms = 0;         //   PERIOD ms (0/0: no windows)
  size_t timeline_max_events = 1000000;  // BB_TIMELINE_MAX_EVENTS: timeline events kept per kind

  uint32_t refresh_ms() const { return static_cast<uint32_t>(refresh_s * 1000.0 + 0.5); }
};

}  // namespace bb::tracer
