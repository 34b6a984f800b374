// CUPTI's callbacks for the real CuptiApi (cupti_library.cpp): activity buffers handed out and
// decoded into tracer/devtime/collector.h's records, the launch callback that ties launches to ops
// (and detaches CUPTI when asked), and Watch mode's callback. Nothing may escape them: CUPTI calls
// them from C, and an error loses records, never the program.
#include <cctype>
#include <cstdlib>
#include <unordered_map>

#include "tracer/devtime/cupti_shared.h"

namespace bb::devtime::cupti_detail {

std::atomic<Collector*> g_sink{nullptr};
std::atomic<bool> g_recording{true};
std::atomic<uint32_t> g_last_linked{0};
std::atomic<int> g_detach{kAttached};
std::atomic<uint64_t> g_attach_generation{1};
std::atomic<bool (*)()> g_inside_op{nullptr};
Fns g_fns;
thread_local ThreadOps t_ops;
[[gnu::noinline]] ThreadOps& thread_ops() { return t_ops; }

namespace {
std::mutex g_batches_mu;
auto* g_batches = new std::vector<std::shared_ptr<LinkBatch>>();  // never freed: used at exit
}  // namespace

static void hand_over(Collector& sink, std::vector<std::pair<uint32_t, uint64_t>>& links) {
  if (!links.empty()) sink.add_externals(links);
  links.clear();
}

void take_all_batches(Collector& sink) {
  std::vector<std::pair<uint32_t, uint64_t>> mine;
  std::lock_guard<std::mutex> lock(g_batches_mu);
  for (auto it = g_batches->begin(); it != g_batches->end();) {
    {
      std::lock_guard<std::mutex> l((*it)->mu);
      mine.swap((*it)->links);
    }
    hand_over(sink, mine);
    // Its thread has ended (only this list holds it): nothing more comes into it. A program that
    // launches from a new thread per task would otherwise keep one batch per thread it ever had.
    if (it->use_count() == 1) it = g_batches->erase(it);
    else
      ++it;
  }
}

static const char* memcpy_name(uint8_t kind) {
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

// Buffers of the size set_activity_buffers() asks for, kept for reuse: a buffer freed after every forced
// flush is a fresh mapping at the next request, whose pages CUPTI then faults in inside the next launch.
namespace {
std::atomic<size_t> g_buffer_bytes{kBufferBytes};
std::atomic<size_t> g_buffers_kept{0};
std::mutex g_pool_mu;
auto* g_pool = new std::vector<uint8_t*>();  // never freed: CUPTI may hand buffers back at exit
}  // namespace

void set_buffers(size_t bytes, size_t keep) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_buffer_bytes.store(bytes);
  g_buffers_kept.store(keep);
  for (uint8_t* b : *g_pool) std::free(b);  // (of the size before)
  g_pool->clear();
}

void CUPTIAPI on_buffer_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t bytes = g_buffer_bytes.load();
  *buffer = nullptr;
  if (g_buffers_kept.load()) {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    if (!g_pool->empty()) {
      *buffer = g_pool->back();
      g_pool->pop_back();
    }
  }
  if (!*buffer) *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer ? bytes : 0;
  *max_records = 0;
}

static void give_back(uint8_t* buffer, size_t size) {
  if (size == g_buffer_bytes.load() && g_buffers_kept.load()) {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    if (size == g_buffer_bytes.load() && g_pool->size() < g_buffers_kept.load()) {
      g_pool->push_back(buffer);
      return;
    }
  }
  std::free(buffer);
}

// The fields kernel, memcpy and memset records share.
template <typename Record>
static void where(DeviceActivity& a, const Record& r) {
  a.correlation = r.correlationId;
  a.start = r.start;
  a.end = r.end;
  a.device = r.deviceId;
  a.stream = r.streamId;
}

static void decode(Collector& sink, CUpti_Activity* r, uint64_t now) {
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
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      auto* o = reinterpret_cast<CUpti_ActivityOverhead3*>(r);
      if (o->end > o->start) sink.add_overhead(o->end - o->start);
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
      // No round ends here: buffers fill in milliseconds and are handed over in any order, so a call
      // whose records sit in two buffers could be taken as whole after the first and counted again
      // (a trace with more timed calls than calls). Rounds are the collections' (about a second apart).
    }
  } catch (...) {
  }
  give_back(buffer, size);
}

// A launch's link to the call it belongs to, batched per thread (`last`: it is the latest launch linked,
// whose id a window's close waits for).
static void link_launch(ThreadOps& ops, Collector& sink, uint32_t correlation, uint64_t external, bool last) {
  if (!ops.batch) {
    ops.batch = std::make_shared<LinkBatch>();
    ops.batch->links.reserve(kBatch);
    std::lock_guard<std::mutex> lock(g_batches_mu);
    g_batches->push_back(ops.batch);
  }
  std::vector<std::pair<uint32_t, uint64_t>> full;
  {
    std::lock_guard<std::mutex> lock(ops.batch->mu);
    ops.batch->links.emplace_back(correlation, external);
    if (last) g_last_linked.store(correlation, std::memory_order_relaxed);
    if (ops.batch->links.size() >= kBatch) full.swap(ops.batch->links);
  }
  if (!full.empty()) hand_over(sink, full);
}

// Callback mode: a launch on this thread is tagged with the innermost op's id, at the call itself.
// CUPTI calls these from C: nothing may escape them (an error loses records, never the program).
void CUPTIAPI on_launch(void* timeline, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept
    try {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  ThreadOps& ops = thread_ops();
  if (!runtime && ops.inside_runtime()) return;
  // Sampled timing asked to detach: at the exit of the outermost launch call.
  if (cb->callbackSite == CUPTI_API_EXIT && g_detach.load(std::memory_order_relaxed) == kDetachRequested) {
    int want = kDetachRequested;
    if (g_detach.compare_exchange_strong(want, kDetaching)) {
      if (runtime) ops.in_runtime = 0;
      g_fns.finalize();  // our subscriber and buffer callbacks go with it
      g_detach.store(kDetached);
      return;
    }
  }
  Collector* sink = g_sink.load(std::memory_order_relaxed);
  if (!sink) return;
  const bool recording = g_recording.load(std::memory_order_relaxed);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (runtime) ops.in_runtime = g_attach_generation.load(std::memory_order_relaxed);
    ops.api_start = 0;
    ops.entered_recording = recording ? cb->correlationId : 0;
    if (!recording) return;  // between sampled windows
    const int d = ops.depth;
    uint64_t external = d > 0 && d <= kMaxDepth ? ops.external[d - 1] : 0;
    if (d == 0)  // inside an op call sampled timing did not follow (it began between windows)?
      if (bool (*inside)() = g_inside_op.load(std::memory_order_relaxed); inside && inside()) external = kUntrackedCall;
    if (external != 0) link_launch(ops, *sink, cb->correlationId, external, true);
    if (timeline) g_fns.getTimestamp(&ops.api_start);
    return;
  }
  if (runtime) ops.in_runtime = 0;
  // A window opened while this launch was being made (its entry saw the records off, or came before
  // CUPTI was attached again): its kernel may have been recorded with no link. Inside an op call it is
  // an op's launch cut by the window's opening, not work outside any op.
  if (recording && ops.entered_recording != cb->correlationId) {
    bool (*inside)() = g_inside_op.load(std::memory_order_relaxed);
    if (ops.depth > 0 || (inside && inside())) link_launch(ops, *sink, cb->correlationId, kOpeningLaunch, false);
  }
  if (timeline && recording && ops.api_start) {
    ApiCall c;
    c.correlation = cb->correlationId;
    c.start = ops.api_start;
    g_fns.getTimestamp(&c.end);
    c.thread = this_thread_id();
    c.name = api_name(domain, cbid);
    sink->add_api(std::move(c));
  }
} catch (...) {
}

// Watch mode: driver launches made inside a runtime launch are that launch.
void CUPTIAPI on_watched(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept
    try {
  const auto* w = static_cast<const Watcher*>(user);
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const bool launch = runtime ? listed(kRuntimeLaunches, cbid) : listed(kDriverLaunches, cbid);
  ThreadOps& ops = thread_ops();
  if (launch && !runtime && ops.inside_runtime()) return;
  if (cb->callbackSite != CUPTI_API_ENTER) {
    if (launch && runtime) ops.in_runtime = 0;
    return;
  }
  if (launch && runtime) ops.in_runtime = g_attach_generation.load(std::memory_order_relaxed);
  WatchedCall c;
  c.launch = launch;
  if (!launch) c.name = api_name(domain, cbid);
  c.correlation = cb->correlationId;
  c.thread = this_thread_id();
  g_fns.getTimestamp(&c.time);
  w->listener(c, w->user);
} catch (...) {
}

}  // namespace bb::devtime::cupti_detail
