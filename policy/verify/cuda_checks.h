// Integrity checks on what a CUDA call did inside its timing window (bbreplay): work that escaped
// the caller's stream, launches from other threads or after the call returned, calls that changed
// the device's environment, vendor-library kernels, and times below the speed of light. Pure
// functions of what CUPTI saw, so they are tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bb::verify {

struct WindowActivity {
  uint64_t start = 0, end = 0;  // CUPTI's clock, ns
  uint32_t stream = 0;
  std::string name;  // demangled kernel name, Memcpy ..., Memset
};

struct WindowLaunch {
  uint64_t time = 0;    // when the launch call was entered
  uint32_t thread = 0;  // gettid() of the launching thread
};

// One timed call, as CUPTI saw it. Times: t0 before the call (device idle), t_return when it
// returned, t_joined when an event recorded after it on the caller's stream had completed, t1 after
// the whole device was synchronized.
struct Window {
  uint64_t t0 = 0, t_return = 0, t_joined = 0, t1 = 0;
  uint32_t caller_thread = 0;
  std::vector<WindowActivity> activities;  // those that started after t0
  std::vector<WindowLaunch> launches;      // launch calls entered after t0
  std::vector<std::string> environment;    // environment-changing calls made after t0
};

struct Findings {
  std::string escaping;   // why the call's work escaped it; empty when it did not
  std::string tampering;  // the environment-changing calls it made
  std::string library;    // the vendor-library kernels it launched
  std::string blinded;    // launches CUPTI made no record of: its records were switched off around them
  bool any() const { return !escaping.empty() || !tampering.empty() || !library.empty() || !blinded.empty(); }
};

// Device work ending more than this after the caller's stream finished counts as escaped (CUPTI
// converts GPU timestamps to its host clock; the conversion may be off by a few µs).
inline constexpr uint64_t kJoinSlackNs = 20'000;

Findings inspect(const Window& w);

// cuBLAS, cuBLASLt, cuDNN, CUTLASS, cuFFT kernel names (as CUPTI reports them, demangled).
bool library_kernel(const std::string& name);

// The least time in which `bytes` can be written at `bytes_per_us`; 0 when either is unknown.
double speed_of_light_us(double bytes, double bytes_per_us);

}  // namespace bb::verify
