// Device time of one call on CUDA, for bbreplay: CUPTI's kernel, copy and set records from every
// stream, inside a window where the device is otherwise idle, with the L2 cache evicted before it.
// CUDA events around the call are the cross-check (they also count launch overhead, so they read
// longer). CUPTI's callbacks on launches and on environment-changing calls feed the integrity checks
// (policy/verify/cuda_checks.h). Built where CUDA and CUPTI's headers are found; elsewhere make_cupti_call_timer
// says why not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "policy/verify/cuda_checks.h"

namespace bb::replay {

struct CuptiCallSample {
  double device_us = 0;       // busy time of the call's device work, overlaps across streams counted once
  double events_us = 0;       // CUDA events recorded before and after the call on the legacy default stream
  int activities = 0;         // kernels, copies and sets seen in the window
  int streams = 0;            // distinct streams they ran on
  verify::Findings findings;  // integrity: escaped work, environment changes, vendor-library kernels
  // Host time of the timer's own steps, µs: handing CUPTI's records over before the window, evicting L2
  // (and waiting for the device), the window itself (call to the device idle again), collecting its records.
  struct Steps {
    double flush = 0, evict = 0, window = 0, collect = 0;
  } steps;
};

class CuptiCallTimer {
 public:
  virtual ~CuptiCallTimer() = default;
  // Runs `call` once, timed. `call` must not synchronize: the timer finds out what it left running.
  virtual CuptiCallSample time(const std::function<void()>& call) = 0;
  // Bytes per µs a device-to-device copy reaches on this device (measured once; 0 if unknown).
  virtual double copy_bandwidth() const = 0;
  // "" while CUPTI's subscriber and launch callbacks are still this timer's; else what changed.
  virtual std::string ownership() const = 0;
  // Whether each window is preceded by a forced flush of CUPTI's records too (off: the previous window's
  // flush is the last; bench/call_timer.cpp measures both).
  virtual void flush_before(bool on) = 0;
};

// `byte` (0-255): from now on, every block the CUDA caching allocator hands out, on any device, is filled
// with `byte` on the allocation's stream before the caller can use it; -1: no more. The cost is one memset
// per allocation while on, nothing else (the memory still free in the cache is left alone). False where
// this build has no CUDA parts or the allocator cannot report its allocations (the cudaMallocAsync
// backend): then nothing is filled.
bool poison_cuda_allocations(int byte);

// Free memory of the current CUDA device (cudaMemGetInfo), 0 where unknown or this build has no CUDA.
uint64_t cuda_free_bytes();

// Null, with the reason in `why`, when device timing is unavailable. `torch_lib_dir`: where torch's
// libcupti may be found.
std::unique_ptr<CuptiCallTimer> make_cupti_call_timer(int device, const std::string& torch_lib_dir, std::string* why);

}  // namespace bb::replay
