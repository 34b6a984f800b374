// The real CuptiApi: the libcupti that torch already loaded (never a second copy), its functions
// looked up by dlsym on that library's own handle, so that the preload's interposers of
// cuptiActivityRegisterCallbacks & co. (shim/bootstrap.c), which watch other CUPTI clients, never see
// our own calls. Records are decoded into tracer/devtime/collector.h's types in the buffer callbacks.
#include "tracer/devtime/cupti_library.h"

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace bb::devtime {
namespace {

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
  CUptiResult (*finalize)();
};

// The launch calls: each makes one kernel, copy or set on the device. Callback mode watches these;
// external-all mode keeps API records for these only.
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
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
constexpr CUpti_CallbackId kDriverLaunches[] = {
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
constexpr CUpti_CallbackId kRuntimeEnvironment[] = {
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
constexpr CUpti_CallbackId kDriverEnvironment[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetLimit,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCacheConfig,
    CUPTI_DRIVER_TRACE_CBID_cuCtxResetPersistingL2Cache,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSetAttribute_ptsz,
};
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
constexpr CUpti_ActivityKind kExternalKinds[] = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
                                                 CUPTI_ACTIVITY_KIND_DRIVER};
constexpr size_t kBufferBytes = 8 << 20;

std::atomic<Collector*> g_sink{nullptr};
std::atomic<bool> g_recording{true};     // false between sampled timing's windows: launches are not tied to ops
std::atomic<uint32_t> g_last_linked{0};  // the correlation id of the latest launch tied to an op
// Sampled timing detaches CUPTI between windows: cuptiFinalize, called where NVIDIA says it is safe
// (at the exit of a CUDA API call, here the next launch's), leaves no CUPTI cost on launches.
enum DetachState : int { kAttached, kDetachRequested, kDetaching, kDetached };
std::atomic<int> g_detach{kAttached};
// Bumped each time CUPTI is attached again: a thread whose runtime launch lost its exit callback to
// a detach must not skip its next driver launches as part of that launch.
std::atomic<uint64_t> g_attach_generation{1};
Fns g_fns;

// Callback mode: the op stack of this thread, read by the launch callback, and the links it made
// (launch correlation id -> op id), handed to the collector in batches. A completed buffer's
// kernels were launched before it completed, so their links are already in some thread's batch:
// the buffer callback takes all batches before it decodes the buffer.
constexpr int kMaxDepth = 256;
constexpr size_t kBatch = 4096;
struct LinkBatch {
  std::mutex mu;
  std::vector<std::pair<uint32_t, uint64_t>> links;
};
std::mutex g_batches_mu;
auto* g_batches = new std::vector<std::shared_ptr<LinkBatch>>();  // never freed: used at exit

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
  std::shared_ptr<LinkBatch> batch;
};
thread_local ThreadOps t_ops;

void hand_over(Collector& sink, std::vector<std::pair<uint32_t, uint64_t>>& links) {
  if (!links.empty()) sink.add_externals(links);
  links.clear();
}

void take_all_batches(Collector& sink) {
  std::vector<std::pair<uint32_t, uint64_t>> mine;
  std::lock_guard<std::mutex> lock(g_batches_mu);
  for (auto& b : *g_batches) {
    {
      std::lock_guard<std::mutex> l(b->mu);
      mine.swap(b->links);
    }
    hand_over(sink, mine);
  }
}

const char* memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    default: return "Memcpy";
  }
}

std::string api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  static std::mutex mu;
  static auto* names = new std::unordered_map<uint64_t, std::string>();  // never freed: used at exit
  const uint64_t key = (static_cast<uint64_t>(domain) << 32) | cbid;
  std::lock_guard<std::mutex> lock(mu);
  auto it = names->find(key);
  if (it != names->end()) return it->second;
  const char* name = nullptr;
  std::string s = g_fns.getCallbackName && g_fns.getCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name
                      ? name
                      : "cbid " + std::to_string(cbid);
  // CUPTI names carry the API version (cudaLaunchKernel_v7000); torch.profiler shows them without.
  const auto v = s.rfind("_v");
  if (v != std::string::npos && v + 2 < s.size() && std::isdigit(static_cast<unsigned char>(s[v + 2]))) s.erase(v);
  return names->emplace(key, s).first->second;
}

void CUPTIAPI on_buffer_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

// The fields kernel, memcpy and memset records share.
template <typename Record>
void where(DeviceActivity& a, const Record& r) {
  a.correlation = r.correlationId;
  a.start = r.start;
  a.end = r.end;
  a.device = r.deviceId;
  a.stream = r.streamId;
}

void decode(Collector& sink, CUpti_Activity* r, uint64_t now) {
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(r);
      DeviceActivity a;
      a.kind = ActivityKind::Kernel;
      where(a, *k);
      a.name = k->name ? k->name : "?";
      a.grid[0] = k->gridX, a.grid[1] = k->gridY, a.grid[2] = k->gridZ;
      a.block[0] = k->blockX, a.block[1] = k->blockY, a.block[2] = k->blockZ;
      sink.add_activity(std::move(a), now);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(r);
      DeviceActivity a;
      a.kind = ActivityKind::Memcpy;
      where(a, *m);
      a.name = memcpy_name(m->copyKind);
      a.bytes = m->bytes;
      sink.add_activity(std::move(a), now);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(r);
      DeviceActivity a;
      a.kind = ActivityKind::Memset;
      where(a, *m);
      a.name = "Memset";
      a.bytes = m->bytes;
      sink.add_activity(std::move(a), now);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      auto* e = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(r);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2)
        sink.add_external(e->correlationId, e->externalId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      auto* api = reinterpret_cast<CUpti_ActivityAPI*>(r);
      ApiCall c;
      c.correlation = api->correlationId;
      c.start = api->start;
      c.end = api->end;
      c.thread = api->threadId;
      c.name = api_name(
          r->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, api->cbid);
      sink.add_api(std::move(c));
      break;
    }
    default: break;
  }
}

void CUPTIAPI on_buffer_complete(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) noexcept {
  try {
    Collector* sink = g_sink.load();
    if (sink) take_all_batches(*sink);
    if (sink && valid > 0) {
      uint64_t now = 0;
      g_fns.getTimestamp(&now);
      CUpti_Activity* record = nullptr;
      while (g_fns.getNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) decode(*sink, record, now);
      size_t dropped = 0;
      if (g_fns.getNumDropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) sink->add_dropped(dropped);
      sink->end_round(false);
    }
  } catch (...) {
  }
  std::free(buffer);
}

// Callback mode: a launch on this thread is tagged with the innermost op's id, at the call itself.
// CUPTI calls these from C: nothing may escape them (an error loses records, never the program).
void CUPTIAPI on_launch(void* timeline, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept
    try {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime && t_ops.inside_runtime()) return;
  // Sampled timing asked to detach: at the exit of the outermost launch call.
  if (cb->callbackSite == CUPTI_API_EXIT && g_detach.load(std::memory_order_relaxed) == kDetachRequested) {
    int want = kDetachRequested;
    if (g_detach.compare_exchange_strong(want, kDetaching)) {
      if (runtime) t_ops.in_runtime = 0;
      g_fns.finalize();  // our subscriber and buffer callbacks go with it
      g_detach.store(kDetached);
      return;
    }
  }
  Collector* sink = g_sink.load(std::memory_order_relaxed);
  if (!sink) return;
  const bool recording = g_recording.load(std::memory_order_relaxed);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (runtime) t_ops.in_runtime = g_attach_generation.load(std::memory_order_relaxed);
    t_ops.api_start = 0;
    if (!recording) return;  // between sampled windows
    const int d = t_ops.depth;
    if (d > 0 && d <= kMaxDepth) {
      if (!t_ops.batch) {
        t_ops.batch = std::make_shared<LinkBatch>();
        t_ops.batch->links.reserve(kBatch);
        std::lock_guard<std::mutex> lock(g_batches_mu);
        g_batches->push_back(t_ops.batch);
      }
      std::vector<std::pair<uint32_t, uint64_t>> full;
      {
        std::lock_guard<std::mutex> lock(t_ops.batch->mu);
        t_ops.batch->links.emplace_back(cb->correlationId, t_ops.external[d - 1]);
        g_last_linked.store(cb->correlationId, std::memory_order_relaxed);
        if (t_ops.batch->links.size() >= kBatch) full.swap(t_ops.batch->links);
      }
      if (!full.empty()) hand_over(*sink, full);
    }
    if (timeline) g_fns.getTimestamp(&t_ops.api_start);
    return;
  }
  if (runtime) t_ops.in_runtime = 0;
  if (timeline && recording && t_ops.api_start) {
    ApiCall c;
    c.correlation = cb->correlationId;
    c.start = t_ops.api_start;
    g_fns.getTimestamp(&c.end);
    c.thread = this_thread_id();
    c.name = api_name(domain, cbid);
    sink->add_api(std::move(c));
  }
} catch (...) {
}

// Watch mode: every watched call, at its entry, to the listener. Driver launches made inside a runtime
// launch are that launch.
struct Watcher {
  CallListener listener;
  void* user;
};

template <size_t N>
bool listed(const CUpti_CallbackId (&ids)[N], CUpti_CallbackId id) {
  for (CUpti_CallbackId x : ids)
    if (x == id) return true;
  return false;
}

void CUPTIAPI on_watched(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept
    try {
  const auto* w = static_cast<const Watcher*>(user);
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const bool launch = runtime ? listed(kRuntimeLaunches, cbid) : listed(kDriverLaunches, cbid);
  if (launch && !runtime && t_ops.inside_runtime()) return;
  if (cb->callbackSite != CUPTI_API_ENTER) {
    if (launch && runtime) t_ops.in_runtime = 0;
    return;
  }
  if (launch && runtime) t_ops.in_runtime = g_attach_generation.load(std::memory_order_relaxed);
  WatchedCall c;
  c.launch = launch;
  if (!launch) c.name = api_name(domain, cbid);
  c.correlation = cb->correlationId;
  c.thread = this_thread_id();
  g_fns.getTimestamp(&c.time);
  w->listener(c, w->user);
} catch (...) {
}

struct FindCupti {
  std::string path;
};
int find_loaded(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  if (std::strncmp(base, "libcupti.so", 11) != 0) return 0;
  static_cast<FindCupti*>(data)->path = name;
  return 1;
}

class RealCupti : public CuptiApi {
 public:
  RealCupti(void* handle, CuptiMode mode, bool timeline, CallListener listener, void* user)
      : handle_(handle), mode_(mode), timeline_(timeline), watcher_{listener, user} {}

  std::string enable(Collector* sink) override {
    g_sink.store(sink);
    if (auto err =
            call("cuptiActivityRegisterCallbacks", g_fns.registerCallbacks(&on_buffer_request, &on_buffer_complete));
        !err.empty())
      return err;
    std::string err;                   // each step below runs only when the ones before it succeeded
    if (mode_ != CuptiMode::Callback)  // callback mode turns its records on last (below)
      if (err = enable_kinds(kKinds); !err.empty()) return err;
    switch (mode_) {
      case CuptiMode::Callback:
        // Linking before records: a launch in between is linked and has no record (its link expires)
        // rather than a record no op claims.
        (err = subscribe(&on_launch, timeline_ ? this : nullptr)).empty() &&
            (err = watch(CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeLaunches)).empty() &&
            (err = watch(CUPTI_CB_DOMAIN_DRIVER_API, kDriverLaunches)).empty() && (err = enable_kinds(kKinds)).empty();
        return err;
      case CuptiMode::ExternalAll:
        // Every API record on, then all but the launches off again.
        if (err = enable_kinds(kExternalKinds); !err.empty()) return err;
        for (CUpti_CallbackId id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id)
          if (!listed(kRuntimeLaunches, id)) g_fns.enableRuntimeApi(id, 0);
        for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id)
          if (!listed(kDriverLaunches, id)) g_fns.enableDriverApi(id, 0);
        return "";
      case CuptiMode::Watch:
        if (!watcher_.listener) return "Watch mode needs a listener";
        (err = subscribe(&on_watched, &watcher_)).empty() &&
            (err = watch(CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeLaunches)).empty() &&
            (err = watch(CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeEnvironment)).empty() &&
            (err = watch(CUPTI_CB_DOMAIN_DRIVER_API, kDriverLaunches)).empty() &&
            (err = watch(CUPTI_CB_DOMAIN_DRIVER_API, kDriverEnvironment)).empty();
        return err;
      case CuptiMode::KernelsOnly: break;
    }
    return "";
  }

  void disable() override {
    if (detached()) return;  // nothing of ours is left in CUPTI (and a call would attach it again)
    if (subscriber_) {
      g_fns.unsubscribe(subscriber_);
      subscriber_ = nullptr;
    }
    if (mode_ == CuptiMode::ExternalAll)
      for (CUpti_ActivityKind k : kExternalKinds) g_fns.activityDisable(k);
    for (CUpti_ActivityKind k : kKinds) g_fns.activityDisable(k);
  }

  bool uses_callbacks() const override { return mode_ == CuptiMode::Callback; }

  // Linking on before the records (a launch in between is linked and has no record: its link
  // expires); records off before linking.
  std::string record(bool on) override {
    if (detached()) return on ? "CUPTI is detached" : "";
    if (on) {
      g_recording.store(true);
      return enable_kinds(kKinds);
    }
    std::string err;
    for (CUpti_ActivityKind k : kKinds)
      if (auto e = call("cuptiActivityDisable(kind " + std::to_string(k) + ")", g_fns.activityDisable(k)); err.empty())
        err = e;
    g_recording.store(false);
    return err;
  }

  void push(uint64_t external) override {
    if (mode_ == CuptiMode::KernelsOnly || mode_ == CuptiMode::Watch) return;
    if (mode_ == CuptiMode::Callback) {
      if (t_ops.depth < kMaxDepth) t_ops.external[t_ops.depth] = external;
      ++t_ops.depth;
      return;
    }
    g_fns.pushExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, external);
  }
  void pop() override {
    if (mode_ == CuptiMode::KernelsOnly || mode_ == CuptiMode::Watch) return;
    if (mode_ == CuptiMode::Callback) {
      if (t_ops.depth > 0) --t_ops.depth;
      return;
    }
    uint64_t last = 0;
    g_fns.popExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &last);
  }
  void flush(bool forced) override {
    if (detached()) return;
    if (Collector* sink = g_sink.load()) take_all_batches(*sink);  // the links first, whatever comes
    g_fns.flushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  }
  uint64_t now() override {
    uint64_t t = 0;
    if (!detached()) g_fns.getTimestamp(&t);
    return t;
  }

  // Only in callback mode (cuptiFinalize is called from the launch callback) and without a timeline
  // (which reads CUPTI's clock for every op, and any CUPTI call attaches CUPTI again).
  bool can_detach() const override { return mode_ == CuptiMode::Callback && !timeline_; }
  bool detach(uint32_t wait_ms) override {
    if (!can_detach()) return false;
    int state = g_detach.load();
    if (state == kAttached) g_detach.compare_exchange_strong(state, kDetachRequested);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (g_detach.load() != kDetached && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    state = kDetachRequested;  // not carried out in time (no launch came): withdrawn
    if (g_detach.compare_exchange_strong(state, kAttached)) return false;
    while (g_detach.load() != kDetached) std::this_thread::yield();  // being carried out now
    subscriber_ = nullptr;
    return true;
  }
  std::string attach() override {
    if (!detached()) return "";
    g_attach_generation.fetch_add(1);
    g_detach.store(kAttached);
    g_recording.store(true);
    return enable(g_sink.load());
  }
  bool detached() const override {
    const int s = g_detach.load();
    return s == kDetached || s == kDetaching;
  }
  uint32_t last_linked() const override { return g_last_linked.load(); }

 private:
  template <size_t N>
  static std::string enable_kinds(const CUpti_ActivityKind (&kinds)[N]) {
    for (CUpti_ActivityKind k : kinds)
      if (auto err = call("cuptiActivityEnable(kind " + std::to_string(k) + ")", g_fns.activityEnable(k)); !err.empty())
        return err;
    return "";
  }

  // Takes CUPTI's one subscriber slot for `fn`; watch() then turns its callbacks on, id by id.
  std::string subscribe(CUpti_CallbackFunc fn, void* user) {
    std::string err = call("cuptiSubscribe", g_fns.subscribe(&subscriber_, fn, user));
    if (!err.empty()) subscriber_ = nullptr;
    return err;
  }

  template <size_t N>
  std::string watch(CUpti_CallbackDomain domain, const CUpti_CallbackId (&ids)[N]) {
    const char* which = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime " : "driver ";
    for (CUpti_CallbackId id : ids)
      if (auto err = call(std::string("cuptiEnableCallback(") + which + std::to_string(id) + ")",
                          g_fns.enableCallback(1, subscriber_, domain, id));
          !err.empty())
        return err;
    return "";
  }

  // The checked call: names the call and CUPTI's error.
  static std::string call(const std::string& what, CUptiResult r) {
    if (r == CUPTI_SUCCESS) return "";
    const char* text = nullptr;
    if (!g_fns.getResultString || g_fns.getResultString(r, &text) != CUPTI_SUCCESS || !text) text = "unknown error";
    return what + " failed: " + text + " (" + std::to_string(r) + ")";
  }
  void* handle_;
  const CuptiMode mode_;
  const bool timeline_;
  Watcher watcher_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
};

}  // namespace

std::unique_ptr<CuptiApi> make_real_cupti(const std::string& torch_lib_dir, CuptiMode mode, bool timeline,
                                          std::string* why, CallListener listener, void* user) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  std::string where;
  if (!h) {
    FindCupti found;
    dl_iterate_phdr(&find_loaded, &found);
    if (!found.path.empty()) h = dlopen(found.path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  }
  // torch loads CUPTI lazily in some builds: then take the copy its wheel ships, else the system's.
  for (const std::string& p :
       {torch_lib_dir + "/../../nvidia/cu13/lib/libcupti.so.13",
        torch_lib_dir + "/../../nvidia/cuda_cupti/lib/libcupti.so.13", std::string("libcupti.so.13")}) {
    if (h) break;
    h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    *why = "libcupti.so.13 is not loaded and could not be found";
    return nullptr;
  }
  struct Want {
    const char* name;
    void** slot;
  };
  const Want want[] = {
      {"cuptiActivityEnable", reinterpret_cast<void**>(&g_fns.activityEnable)},
      {"cuptiActivityDisable", reinterpret_cast<void**>(&g_fns.activityDisable)},
      {"cuptiActivityRegisterCallbacks", reinterpret_cast<void**>(&g_fns.registerCallbacks)},
      {"cuptiActivityEnableRuntimeApi", reinterpret_cast<void**>(&g_fns.enableRuntimeApi)},
      {"cuptiActivityEnableDriverApi", reinterpret_cast<void**>(&g_fns.enableDriverApi)},
      {"cuptiActivityPushExternalCorrelationId", reinterpret_cast<void**>(&g_fns.pushExternal)},
      {"cuptiActivityPopExternalCorrelationId", reinterpret_cast<void**>(&g_fns.popExternal)},
      {"cuptiActivityFlushAll", reinterpret_cast<void**>(&g_fns.flushAll)},
      {"cuptiGetTimestamp", reinterpret_cast<void**>(&g_fns.getTimestamp)},
      {"cuptiActivityGetNextRecord", reinterpret_cast<void**>(&g_fns.getNextRecord)},
      {"cuptiActivityGetNumDroppedRecords", reinterpret_cast<void**>(&g_fns.getNumDropped)},
      {"cuptiGetCallbackName", reinterpret_cast<void**>(&g_fns.getCallbackName)},
      {"cuptiGetResultString", reinterpret_cast<void**>(&g_fns.getResultString)},
      {"cuptiSubscribe", reinterpret_cast<void**>(&g_fns.subscribe)},
      {"cuptiUnsubscribe", reinterpret_cast<void**>(&g_fns.unsubscribe)},
      {"cuptiEnableCallback", reinterpret_cast<void**>(&g_fns.enableCallback)},
      {"cuptiFinalize", reinterpret_cast<void**>(&g_fns.finalize)},
  };
  for (const Want& w : want) {
    *w.slot = dlsym(h, w.name);
    if (!*w.slot) {
      *why = std::string("this libcupti has no ") + w.name;
      return nullptr;
    }
  }
  return std::make_unique<RealCupti>(h, mode, timeline, listener, user);
}

}  // namespace bb::devtime
