// Inside bb_cupti only: the CUPTI functions the library resolved, the callback ids and activity kinds
// it watches, and the state its CUPTI callbacks (cupti_callbacks.cpp) share with the CuptiApi
// (cupti_library.cpp). Includes CUPTI's headers; nothing outside tracer/devtime includes it.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tracer/devtime/collector.h"
#include "tracer/devtime/cupti_library.h"

namespace bb::devtime::cupti_detail {

// The CUPTI functions we call, resolved once.
struct Fns {
  CUptiResult (*activityEnable)(CUpti_ActivityKind);
  CUptiResult (*activityDisable)(CUpti_ActivityKind);
  CUptiResult (*registerCallbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*enableRuntimeApi)(CUpti_CallbackId, uint8_t);
  CUptiResult (*enableDriverApi)(CUpti_CallbackId, uint8_t);
  CUptiResult (*pushExternal)(CUpti_ExternalCorrelationKind, uint64_t);
  CUptiResult (*popExternal)(CUpti_ExternalCorrelationKind, uint64_t*);
  CUptiResult (*flushAll)(uint32_t);
  CUptiResult (*getTimestamp)(uint64_t*);
  CUptiResult (*getNextRecord)(uint8_t*, size_t, CUpti_Activity**);
  CUptiResult (*getNumDropped)(CUcontext, uint32_t, size_t*);
  CUptiResult (*getCallbackName)(CUpti_CallbackDomain, uint32_t, const char**);
  CUptiResult (*getResultString)(CUptiResult, const char**);
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
  CUptiResult (*enableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
  CUptiResult (*getCallbackState)(uint32_t*, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
  CUptiResult (*finalize)();
};

// The launch calls: each makes one kernel, copy or set on the device. Callback mode watches these;
// external-all mode keeps API records for these only.
inline constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
};
inline constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
};
// Calls that change what a kernel's timing depends on: limits, L2 persistence, cache and shared-memory
// configuration, stream attributes (access policy windows), the device itself.
inline constexpr CUpti_CallbackId kRuntimeEnvironment[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSetLimit_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaThreadSetLimit_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSetCacheConfig_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSetSharedMemConfig_v4020,
    CUPTI_RUNTIME_TRACE_CBID_cudaCtxResetPersistingL2Cache_v11000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSetAttribute_v11000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSetAttribute_ptsz_v11000,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSetMemPool_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDeviceFlags_v3020,
};
inline constexpr CUpti_CallbackId kDriverEnvironment[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetLimit,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCacheConfig,
    CUPTI_DRIVER_TRACE_CBID_cuCtxResetPersistingL2Cache,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSetAttribute_ptsz,
};
inline constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                CUPTI_ACTIVITY_KIND_MEMSET};
inline constexpr CUpti_ActivityKind kExternalKinds[] = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                                        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
inline constexpr size_t kBufferBytes = 8 << 20;  // activity buffers' size unless set_activity_buffers() says
void set_buffers(size_t bytes, size_t keep);

extern std::atomic<Collector*> g_sink;
extern std::atomic<bool> g_recording;        // false between windows: launches are not tied to ops
extern std::atomic<uint32_t> g_last_linked;  // the correlation id of the latest launch tied to an op
// Sampled timing detaches CUPTI between windows: cuptiFinalize, called where NVIDIA says it is safe
// (at the exit of a CUDA API call, here the next launch's), leaves no CUPTI cost on launches.
enum DetachState : int { kAttached, kDetachRequested, kDetaching, kDetached };
extern std::atomic<int> g_detach;
// Bumped each time CUPTI is attached again: a thread whose runtime launch lost its exit callback to
// a detach must not skip its next driver launches as part of that launch.
extern std::atomic<uint64_t> g_attach_generation;
// Whether this thread is inside an op call (set_op_probe): with no call of ours on its stack, such a
// launch belongs to a call sampled timing did not follow, and is tied to kUntrackedCall.
extern std::atomic<bool (*)()> g_inside_op;
extern Fns g_fns;

// Callback mode: the op stack of this thread, read by the launch callback, and the links it made
// (launch correlation id -> op id), handed to the collector in batches. A completed buffer's
// kernels were launched before it completed, so their links are already in some thread's batch:
// the buffer callback takes all batches before it decodes the buffer.
inline constexpr int kMaxDepth = 256;
inline constexpr size_t kBatch = 4096;
struct LinkBatch {
  std::mutex mu;
  std::vector<std::pair<uint32_t, uint64_t>> links;
};

struct ThreadOps {
  uint64_t external[kMaxDepth];
  int depth = 0;
  // Inside a runtime launch (the attach generation it began in; 0: not): the driver launch it makes
  // is the same launch.
  uint64_t in_runtime = 0;
  bool inside_runtime() const {
    return in_runtime != 0 && in_runtime == g_attach_generation.load(std::memory_order_relaxed);
  }
  uint64_t api_start = 0;
  // The correlation id of the launch whose entry this thread last saw with the records on (0: off): a
  // launch that returns with them on and another id here began before a window opened (kOpeningLaunch).
  uint32_t entered_recording = 0;
  std::shared_ptr<LinkBatch> batch;
};
extern thread_local ThreadOps t_ops;
// t_ops's address, taken once per callback: in the preload every thread_local access is a call to
// __tls_get_addr (and t_ops's own guard), which the compiler otherwise repeats at each use.
ThreadOps& thread_ops();

// Every thread's links to the collector (before a buffer is decoded, and before a flush).
void take_all_batches(Collector& sink);
std::string api_name(CUpti_CallbackDomain domain, uint32_t cbid);  // without the _v7000 version suffix

template <size_t N>
bool listed(const CUpti_CallbackId (&ids)[N], CUpti_CallbackId id) {
  for (CUpti_CallbackId x : ids)
    if (x == id) return true;
  return false;
}

// Watch mode's listener, as the subscriber's user data.
struct Watcher {
  CallListener listener;
  void* user;
};

// CUPTI's callbacks (cupti_callbacks.cpp).
void CUPTIAPI on_buffer_request(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI on_buffer_complete(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) noexcept;
// Callback mode: ties each launch to this thread's innermost op; carries out a requested detach.
void CUPTIAPI on_launch(void* timeline, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept;
// Watch mode: every watched call, at its entry, to the Watcher's listener.
void CUPTIAPI on_watched(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept;

}  // namespace bb::devtime::cupti_detail
