// The real CuptiApi: the libcupti that torch already loaded (never a second copy), its functions
// looked up by dlsym on that library's own handle, so that the preload's interposers of
// cuptiActivityRegisterCallbacks & co. (shim/bootstrap.c), which watch other CUPTI clients, never see
// our own calls. The callbacks CUPTI calls (buffers, launches, watched calls) are in cupti_callbacks.cpp.
#include "tracer/devtime/cupti_library.h"

#include <dlfcn.h>
#include <link.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "tracer/devtime/cupti_shared.h"

namespace bb::devtime {
namespace {

using namespace cupti_detail;

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
    g_fns.activityDisable(CUPTI_ACTIVITY_KIND_OVERHEAD);
  }

  bool uses_callbacks() const override { return mode_ == CuptiMode::Callback; }
  bool links_untracked() const override {
    return mode_ == CuptiMode::Callback && g_inside_op.load(std::memory_order_relaxed) != nullptr;
  }

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
    g_fns.activityDisable(CUPTI_ACTIVITY_KIND_OVERHEAD);
    g_recording.store(false);
    return err;
  }

  void push(uint64_t external) override {
    if (mode_ == CuptiMode::KernelsOnly || mode_ == CuptiMode::Watch) return;
    if (mode_ == CuptiMode::Callback) {
      ThreadOps& ops = thread_ops();
      if (ops.depth < kMaxDepth) ops.external[ops.depth] = external;
      ++ops.depth;
      return;
    }
    g_fns.pushExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, external);
  }
  void pop() override {
    if (mode_ == CuptiMode::KernelsOnly || mode_ == CuptiMode::Watch) return;
    if (mode_ == CuptiMode::Callback) {
      ThreadOps& ops = thread_ops();
      if (ops.depth > 0) --ops.depth;
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
    g_last_linked.store(0);  // a new CUPTI session's correlation ids may start over
    g_detach.store(kAttached);
    g_recording.store(true);
    return enable(g_sink.load());
  }
  bool detached() const override {
    const int s = g_detach.load();
    return s == kDetached || s == kDetaching;
  }
  uint32_t last_linked() const override { return g_last_linked.load(); }

  std::string ownership() const override {
    if (!subscriber_ || detached()) return "";
    for (auto [domain, id] : {std::pair{CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeLaunches[0]},
                              std::pair{CUPTI_CB_DOMAIN_DRIVER_API, kDriverLaunches[0]}}) {
      uint32_t on = 0;
      if (g_fns.getCallbackState(&on, subscriber_, domain, id) != CUPTI_SUCCESS || !on)
        return "CUPTI's launch callbacks are no longer bbreplay's (its subscriber was removed or its callback "
               "turned off)";
    }
    CUpti_SubscriberHandle other = nullptr;  // the one slot must still be taken (by bbreplay)
    if (g_fns.subscribe(&other, &on_watched, nullptr) == CUPTI_SUCCESS) {
      g_fns.unsubscribe(other);
      return "CUPTI's subscriber slot was free: bbreplay's subscriber had been removed";
    }
    return "";
  }

 private:
  // Also CUPTI's overhead records, where this CUPTI has them (what measuring cost; not needed).
  template <size_t N>
  static std::string enable_kinds(const CUpti_ActivityKind (&kinds)[N]) {
    for (CUpti_ActivityKind k : kinds)
      if (auto err = call("cuptiActivityEnable(kind " + std::to_string(k) + ")", g_fns.activityEnable(k)); !err.empty())
        return err;
    if (&kinds[0] == &kKinds[0]) g_fns.activityEnable(CUPTI_ACTIVITY_KIND_OVERHEAD);
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
      {"cuptiGetCallbackState", reinterpret_cast<void**>(&g_fns.getCallbackState)},
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

void set_op_probe(bool (*inside_op)()) { g_inside_op.store(inside_op); }

void set_activity_buffers(size_t bytes, size_t keep) { set_buffers(bytes, keep); }

}  // namespace bb::devtime
