// Value ranges of CUDA integer tensors without a device synchronization: on the calls that are
// sampled, an aminmax runs on the op's own stream and its two numbers are copied into a slot of
// pinned host memory behind an event. The writer thread later collects the finished ones
// (cudaEventQuery).
//
// Exit order matters: the CUDA runtime tears itself down in an atexit handler registered when CUDA
// was first used. Ours (drain_before_cuda_exits) is registered later, when the tracer first sees a
// CUDA tensor, so it runs earlier; after it nothing here calls CUDA again. Pinned slots and events
// are raw CUDA objects, never torch tensors, so no destructor touches CUDA at exit.
#include "tracer/cuda_support.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tracer/devtime/cupti_session.h"
#include "tracer/log.h"
#include "tracer/observer.h"
#include "tracer/process_state.h"
#include "tracer/quiet_thread.h"
#ifdef BB_WITH_CUPTI
#include "tracer/devtime/cupti_library.h"
#endif

namespace bb::tracer {
namespace {

constexpr int kSlots = 4096;  // probes in flight at most

struct Pending {
  TraceStore* store;
  uint32_t sig;
  RangeTarget where;
  int slot;
  cudaEvent_t done;
};

// The tracer's CUDA support in this process: made by install_cuda_support with the device-timing
// options, and never freed (the exit handler, the writer thread and CUPTI's listener use it until
// the process ends). Reached through cuda_support(), null before install_cuda_support.
struct CudaSupport {
  CudaSupport(const DeviceTimingOptions& t, bool keep, std::string dir)
      : timing(t), keep_timeline(keep), torch_lib_dir(std::move(dir)) {}

  // Device timing: what it was asked to do, and its session from the first CUDA use on.
  const DeviceTimingOptions timing;
  const bool keep_timeline;         // keep events for a timeline file
  const std::string torch_lib_dir;  // where to look for torch's libcupti when none is loaded
  std::once_flag first_use;
  pid_t owner_pid = 0;  // the process whose CUDA context the probes and CUPTI use (set at first use)
  std::atomic<devtime::CuptiSession*> timer{nullptr};  // never freed: used at exit
  std::atomic<bool> closed{false};                     // the program is exiting: no more CUDA calls

  std::mutex mu;  // guards everything below
  std::vector<Pending> pending;
  std::vector<int> free;
  int64_t* slots = nullptr;  // kSlots x {min, max} in pinned memory
  std::map<std::string, std::string> names;
  unsigned long dropped = 0;
};

std::atomic<CudaSupport*>& installed() {
  BB_CONSTINIT static std::atomic<CudaSupport*> support{nullptr};
  return support;
}
CudaSupport* cuda_support() { return installed().load(std::memory_order_acquire); }

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

int take_slot(CudaSupport& cs) {  // call with cs.mu held
  if (!cs.slots) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, sizeof(int64_t) * 2 * kSlots, cudaHostAllocDefault) != cudaSuccess) return -1;
    cs.slots = static_cast<int64_t*>(p);
    for (int i = kSlots - 1; i >= 0; --i) cs.free.push_back(i);
  }
  if (cs.free.empty()) return -1;
  int slot = cs.free.back();
  cs.free.pop_back();
  return slot;
}

void probe(TraceStore* store, uint32_t sig, RangeTarget where, const at::Tensor& t) {
  CudaSupport& cs = *cuda_support();  // installed before this probe was
  if (cs.closed.load() || !t.is_cuda() || t.numel() == 0) return;
  switch (t.scalar_type()) {  // the integer types aminmax supports on CUDA
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong: break;
    default: return;
  }
  const auto device = t.device().index();
  c10::cuda::CUDAGuard guard(device);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  if (capturing(stream)) return;  // never add work to a CUDA graph being captured
  int slot;
  {
    std::lock_guard<std::mutex> lock(cs.mu);
    slot = take_slot(cs);
  }
  if (slot < 0) return;
  at::RecordFunctionGuard untraced(false);  // our own ops are not the program's
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto [lo, hi] = at::aminmax(t);
  at::Tensor both = at::stack({lo.to(at::kLong), hi.to(at::kLong)});
  cudaEvent_t ev = nullptr;
  bool ok = cudaMemcpyAsync(cs.slots + 2 * slot, both.const_data_ptr(), 2 * sizeof(int64_t), cudaMemcpyDeviceToHost,
                            stream) == cudaSuccess &&
            cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess &&
            cudaEventRecord(ev, stream) == cudaSuccess;
  std::lock_guard<std::mutex> lock(cs.mu);
  if (ok) {
    cs.pending.push_back({store, sig, where, slot, ev});
  } else {
    if (ev) cudaEventDestroy(ev);
    cs.free.push_back(slot);
  }
}

void probe_noexcept(TraceStore* store, uint32_t sig, RangeTarget where, const at::Tensor& t) {
  try {
    probe(store, sig, where, t);
  } catch (const std::exception& e) {
    log::warn_once("cuda-range", std::string("CUDA value-range probe failed (ranges of CUDA integer "
                                             "tensors will be missing): ") +
                                     e.what());
  }
}

struct Finished {
  TraceStore* store;
  uint32_t sig;
  RangeTarget where;
  IntRange range;
};

// Takes the finished probes out; returns how many are still in flight. Call with cs.mu held. The
// results are merged into their stores after cs.mu is released (the store's lock is never taken
// inside cs.mu, nor cs.mu inside it).
size_t collect_locked(CudaSupport& cs, std::vector<Finished>& done) {
  auto& pending = cs.pending;
  size_t kept = 0;
  for (auto& p : pending) {
    cudaError_t st = cudaEventQuery(p.done);
    if (st == cudaErrorNotReady) {
      pending[kept++] = p;
      continue;
    }
    if (st == cudaSuccess) done.push_back({p.store, p.sig, p.where, {cs.slots[2 * p.slot], cs.slots[2 * p.slot + 1]}});
    cudaEventDestroy(p.done);
    cs.free.push_back(p.slot);
  }
  pending.resize(kept);
  return kept;
}

void merge(const std::vector<Finished>& done) {
  for (const auto& f : done) f.store->merge_range(f.sig, f.where, f.range);
}

// ------------------------------------------------------------------ device timing (CUPTI)

// The observer's op hooks (set_op_hooks, a plain function pointer each), with the session as context.
bool timer_op_start(void* timer, uint32_t sig, bool sampled) {
  return static_cast<devtime::CuptiSession*>(timer)->op_start(sig, !sampled);
}
void timer_op_end(void* timer) { static_cast<devtime::CuptiSession*>(timer)->op_end(); }

// From the preload's CUPTI interposers (shim/bootstrap.c, a C function pointer): another client is
// about to act. Called from inside that client's CUPTI call: nothing may escape.
void on_cupti_event(int what) noexcept try {
  CudaSupport* cs = cuda_support();
  devtime::CuptiSession* t = cs ? cs->timer.load() : nullptr;
  if (!t || ::getpid() != cs->owner_pid) return;
  if (what & 2)
    t->taken_over("another CUPTI client (torch.profiler?) is switching CUPTI's timestamps to its own clock");
  else if (what & 4)
    t->taken_over("another CUPTI client finalized CUPTI");
  else if (what & 1)
    t->taken_over("torch.profiler (or another CUPTI client) took over CUPTI's activity buffers");
  else if ((what & 8) && t->uses_callbacks())
    t->taken_over("torch.profiler (or another CUPTI client) subscribed to CUPTI's callbacks");
} catch (...) {
  log::warn_once("cupti-event", "internal error while giving CUPTI to another client; device timing may be wrong");
}

// Why not to start: a profiler already holds CUPTI (seen by the interposers, or injected by nsys/ncu).
std::string cupti_conflict() {
  if (const char* inj = std::getenv("CUDA_INJECTION64_PATH"); inj && *inj)
    return std::string("a CUDA profiler (nsys/ncu) is attached (CUDA_INJECTION64_PATH=") + inj + ")";
  auto seen = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "bbshim_cupti_seen"));
  if (seen && (seen() & 7) != 0)
    return "torch.profiler (or another CUPTI client) used CUPTI before this process first used CUDA";
  return "";
}

// A device-timing thread ended on an exception (a bug of ours): device timing stops and says why;
// tracing goes on.
auto stop_timing_on_error(devtime::CuptiSession* timer, const char* thread) {
  return [timer, thread](const std::string& what) {
    timer->taken_over(std::string("internal error in ") + thread + " (" + what + ")");
  };
}

// Sampled timing: closes each window on_ms after it opened and opens the next one period_ms after
// the last one was due, until timing stops. Slow CUPTI calls (attaching takes milliseconds) shorten
// neither the window nor, unless they overrun it, the period.
void run_windows(devtime::CuptiSession* timer) {
  using clock = std::chrono::steady_clock;
  const auto on = std::chrono::milliseconds(timer->sampling().on_ms);
  const auto period = std::chrono::milliseconds(timer->sampling().period_ms);
  auto due = clock::now(), opened = due;  // the first window opened with start()
  for (;;) {
    std::this_thread::sleep_until(opened + on);
    const auto closing = clock::now();
    due += period;
    if (due < closing + (period - on) / 2) due = closing + (period - on);  // fell behind: keep a gap
    if (!timer->window(false, closing + (due - closing) / 2)) return;      // drains half the gap at most
    std::this_thread::sleep_until(due);
    if (!timer->window(true)) return;
    opened = clock::now();
  }
}

// First-calls timing: the session decides; this thread looks every 2 ms.
void run_first_calls(devtime::CuptiSession* timer) {
  while (timer->tick(std::chrono::steady_clock::now())) std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

void start_sampler(devtime::CuptiSession* timer) {
  if (timer->sampling().mode == devtime::Sampling::Mode::Windows)
    start_quiet_thread([timer] { run_windows(timer); }, stop_timing_on_error(timer, "sampled device timing"),
                       "sampled device timing", "the first window stays open: every call is timed");
  else
    start_quiet_thread([timer] { run_first_calls(timer); }, stop_timing_on_error(timer, "first-calls device timing"),
                       "first-calls device timing", "CUPTI stays attached: every call is timed");
}

// A collection every second while timing runs. CUPTI hands over a buffer when it is full or when
// asked; a buffer that fills slowly (another thread's or stream's work) would otherwise keep its
// records until the trace is next written, while the buffers of a busy thread complete round after
// round and the links its launches need expire.
void start_sweeper(devtime::CuptiSession* timer) {
  start_quiet_thread(
      [timer] {
        for (;;) {
          std::this_thread::sleep_for(std::chrono::seconds(1));
          if (!timer->active()) return;
          timer->round();
        }
      },
      stop_timing_on_error(timer, "device timing's collection"), "device timing's collection every second",
      "records are collected as CUPTI's buffers fill");
}

void start_device_timing(CudaSupport& cs) {
  const DeviceTimingOptions& timing = cs.timing;
  if (!timing.enabled) return;
  devtime::CollectorOptions o;
  o.timeline = cs.keep_timeline;
  o.timeline_max_events = timing.timeline_max_events;
  std::string why;
  std::unique_ptr<devtime::CuptiApi> api;
  std::string conflict = cupti_conflict();
#ifdef BB_WITH_CUPTI
  if (conflict.empty()) {
    devtime::CuptiMode mode = devtime::CuptiMode::Callback;
    if (const char* m = std::getenv("BB_CUPTI_MODE"); m && *m) {
      if (!std::strcmp(m, "external-all")) mode = devtime::CuptiMode::ExternalAll;
      else if (!std::strcmp(m, "kernels-only"))
        mode = devtime::CuptiMode::KernelsOnly;
      else if (std::strcmp(m, "callback") != 0)
        log::warn(std::string("BB_CUPTI_MODE=") + m + " is not callback|external-all|kernels-only; using callback");
    }
    api = devtime::make_real_cupti(cs.torch_lib_dir, mode, o.timeline, &why);
    if (!api) conflict = why;
  }
#else
  if (conflict.empty()) conflict = "this build has no CUPTI headers";
#endif
  devtime::Sampling sampling;
  if (timing.sample_period_ms > 0) {
    sampling = devtime::Sampling::windows(timing.sample_on_ms, timing.sample_period_ms);
  } else if (timing.first_calls && !o.timeline && api && api->can_detach()) {
    // Only where CUPTI can be detached between windows (the callback mode, no timeline): else
    // windows would save next to nothing and time fewer calls.
    sampling = devtime::Sampling::first_calls(timing.calls, timing.refresh_ms(), devtime::CuptiSession::kRepeatGapMs);
    sampling.is_variant = &float_variant;
    sampling.name_of = &describe_signature;
  } else if (timing.first_calls_asked && api)  // the default falls back quietly
    log::warn(
        "BB_DEVICE_TIME=first needs CUPTI detachable between windows (the callback mode, no BB_TIMELINE): "
        "every call is timed");
#ifdef BB_WITH_CUPTI
  // Only where the session leaves calls between windows unfollowed (sampled, no timeline): elsewhere a
  // launch inside a call never pushed (the one inside which timing started) stays unattributed, and a
  // timeline keeps it.
  if (sampling.enabled() && !o.timeline) devtime::set_op_probe(&inside_traced_op);
#endif
  auto* timer = new devtime::CuptiSession(
      std::move(api), o, [](const std::string& m) { log::warn(m); }, sampling);
  if (auto listen = reinterpret_cast<void (*)(void (*)(int))>(dlsym(RTLD_DEFAULT, "bbshim_cupti_listen")))
    listen(&on_cupti_event);
  cs.timer.store(timer);
  if (!timer->start(conflict)) return;
  set_op_hooks(&timer_op_start, &timer_op_end, timer);
  start_sweeper(timer);
  if (sampling.enabled()) start_sampler(timer);
}

// Runs at exit before the CUDA runtime's own teardown: last collection, waiting up to 200 ms.
// Never in a forked child (CUDA cannot be used there) and never twice.
void drain(CudaSupport& cs) {
  if (::getpid() != cs.owner_pid || cs.closed.load()) return;
  if (devtime::CuptiSession* t = cs.timer.load()) t->finish();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (;;) {
    std::vector<Finished> done;
    bool last;
    {
      std::lock_guard<std::mutex> lock(cs.mu);
      last = collect_locked(cs, done) == 0 || std::chrono::steady_clock::now() >= deadline;
      if (last) {
        cs.dropped += cs.pending.size();
        cs.closed.store(true);
      }
    }
    merge(done);
    if (last) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// atexit's (a plain function pointer).
void drain_before_cuda_exits() { drain(*cuda_support()); }

// The tracer's device listener (set_device_listener, a plain function pointer).
void on_device(const std::string& device) {
  CudaSupport& cs = *cuda_support();  // installed before this listener was
  if (device.rfind("cuda:", 0) != 0 || cs.closed.load()) return;
  std::call_once(cs.first_use, [&cs] {
    cs.owner_pid = ::getpid();
    std::atexit(&drain_before_cuda_exits);
    start_device_timing(cs);
  });
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, std::stoi(device.substr(5))) != cudaSuccess) return;
  std::lock_guard<std::mutex> lock(cs.mu);
  cs.names[device] = prop.name;
}

}  // namespace

void install_cuda_support(const DeviceTimingOptions& timing, bool keep_timeline, const std::string& torch_lib_dir) {
  auto* cs = new CudaSupport(timing, keep_timeline, torch_lib_dir);
  CudaSupport* none = nullptr;
  if (!installed().compare_exchange_strong(none, cs)) {
    delete cs;  // installed already
    return;
  }
  set_device_range_probe(&probe_noexcept);
  set_device_listener(&on_device);
}

std::string device_name(const std::string& device) {
  CudaSupport* cs = cuda_support();
  if (!cs) return "";
  std::lock_guard<std::mutex> lock(cs->mu);
  auto it = cs->names.find(device);
  return it == cs->names.end() ? "" : it->second;
}

void collect_device_ranges(bool final) {
  CudaSupport* cs = cuda_support();
  if (!cs) return;
  if (final) drain(*cs);
  if (cs->closed.load() || ::getpid() != cs->owner_pid) return;
  std::vector<Finished> done;
  {
    std::lock_guard<std::mutex> lock(cs->mu);
    collect_locked(*cs, done);
  }
  merge(done);
}

bool device_timing_needs_every_call() {
  CudaSupport* cs = cuda_support();
  devtime::CuptiSession* t = cs ? cs->timer.load(std::memory_order_relaxed) : nullptr;
  return t && ::getpid() == cs->owner_pid && t->needs_every_call();
}

DeviceTimeSnapshot device_time_snapshot() {
  CudaSupport* cs = cuda_support();
  devtime::CuptiSession* t = cs ? cs->timer.load() : nullptr;
  if (!t)
    return {!cs || cs->timing.enabled ? "off: no CUDA device was used" : "off: BB_DEVICE_TIME=0",
            {},
            {},
            "",
            "",
            0,
            0,
            0,
            0,
            {}};
  if (::getpid() == cs->owner_pid) t->round();
  return {t->status(),
          t->collector().by_signature(),
          t->collector().health(),
          t->sampling().mode_name(),
          t->sampling().describe(),
          t->windows(),
          t->detaches(),
          t->control_ns(),
          t->signatures_short(),
          t->events()};
}

devtime::Collector::Timeline device_timeline() {
  CudaSupport* cs = cuda_support();
  devtime::CuptiSession* t = cs ? cs->timer.load() : nullptr;
  return t ? t->collector().timeline() : devtime::Collector::Timeline{};
}

void forget_device_timing() {
  CudaSupport* cs = cuda_support();
  if (devtime::CuptiSession* t = cs ? cs->timer.load() : nullptr) t->forget();
}

unsigned long dropped_device_ranges() {
  CudaSupport* cs = cuda_support();
  if (!cs) return 0;
  std::lock_guard<std::mutex> lock(cs->mu);
  return cs->dropped;
}

}  // namespace bb::tracer
