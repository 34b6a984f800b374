#include "replay/timing/cupti_call_timer.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>

#include "tracer/devtime/cupti_library.h"
#include "tracer/devtime/collector.h"

namespace bb::replay {
namespace {

std::string cuda_error(const char* what, cudaError_t e) {
  return std::string(what) + " failed: " + cudaGetErrorString(e);
}

constexpr size_t kActivityBufferBytes = size_t{1} << 20;

class CuptiCudaTimer : public CuptiCallTimer {
 public:
  CuptiCudaTimer() : collector_(options()) {}
  ~CuptiCudaTimer() override {
    if (api_) {
      api_->flush(true);
      api_->disable();
    }
    if (scratch_) cudaFree(scratch_);
    if (before_) cudaEventDestroy(before_);
    if (after_) cudaEventDestroy(after_);
  }

  std::string init(int device, const std::string& torch_lib_dir) {
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
    cudaDeviceProp prop;
    if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess)
      return cuda_error("cudaGetDeviceProperties", e);
    // Reading twice the L2's size evicts whatever the previous run left there (see time()).
    scratch_bytes_ = std::max<size_t>(2 * static_cast<size_t>(prop.l2CacheSize), size_t{64} << 20);
    if (cudaError_t e = cudaMalloc(&scratch_, scratch_bytes_); e != cudaSuccess) return cuda_error("cudaMalloc", e);
    if (cudaError_t e = cudaMemset(scratch_, 0, scratch_bytes_); e != cudaSuccess) return cuda_error("cudaMemset", e);
    const auto on_device = at::TensorOptions().device(at::kCUDA, device);
    // (read as 8-byte words: summed as bytes, the eviction took 640-800 us a timed call on an H100
    // (bb_bench_call_timer, 2026-12-06), some 20 times what reading 100 MB costs; as words not yet measured)
    scratch_bytes_ &= ~size_t{7};
    scratch_view_ = at::from_blob(scratch_, {static_cast<int64_t>(scratch_bytes_ / 8)}, on_device.dtype(at::kLong));
    scratch_sum_ = at::empty({}, on_device.dtype(at::kLong));
    if (cudaError_t e = cudaEventCreate(&before_); e != cudaSuccess) return cuda_error("cudaEventCreate", e);
    if (cudaError_t e = cudaEventCreate(&after_); e != cudaSuccess) return cuda_error("cudaEventCreate", e);
    // Watch mode feeds the integrity checks; without it (CUPTI's one subscriber slot taken) times are
    // still taken, from records alone.
    // Buffers of 1 MiB (some 5,000 records; a timed call makes a few), reused: every window ends in a
    // forced flush, and a fresh 8 MiB buffer after each had its pages faulted in at the next launch.
    devtime::set_activity_buffers(kActivityBufferBytes, 4);
    std::string why;
    for (auto mode : {devtime::CuptiMode::Watch, devtime::CuptiMode::KernelsOnly}) {
      api_ = devtime::make_real_cupti(torch_lib_dir, mode, false, &why, &on_call, this);
      if (!api_) return why;
      collector_.begin(api_->now());
      std::string err = api_->enable(&collector_);
      if (err.empty()) break;
      api_->disable();
      api_.reset();
      if (mode == devtime::CuptiMode::KernelsOnly) return err;
    }
    measure_bandwidth();
    return "";
  }

  double copy_bandwidth() const override { return bandwidth_; }
  void flush_before(bool on) override { flush_before_ = on; }
  std::string ownership() const override { return api_ ? api_->ownership() : ""; }

  CuptiCallSample time(const std::function<void()>& call) override {
    CuptiCallSample s;
    auto lap = [last = std::chrono::steady_clock::now()](double& into) mutable {
      const auto now = std::chrono::steady_clock::now();
      into += std::chrono::duration<double, std::micro>(now - last).count();
      last = now;
    };
    // After a forced flush CUPTI asks for a new buffer at the next launch, which took ~600 µs of host
    // time inside the window and made the CUDA events read 610 µs for a 13 µs addmm (H200, 2026-11-30),
    // when the flush came just before the call. The previous window's forced flush is followed by
    // launches of ours (inputs, checks, the eviction below), the first of which asks for it, outside
    // this window; records of those launches come with this window's flush, start before t0 and are
    // left out below. A flush here as well cost a second forced flush per timed run.
    if (flush_before_) api_->flush(true);
    collector_.take_timeline();
    lap(s.steps.flush);
    // Evict by reading, not writing: a write (memset, or triton do_bench's zero_()) leaves L2 full of
    // dirty lines, and the call under test then pays for writing them back. Memory-bound kernels read
    // 8-17% above Nsight Compute's (whose --cache-control all invalidates L2) with a memset here (H200,
    // 2026-11-30); a sum over the scratch buffer writes back what the previous run left dirty, before
    // the window, and leaves L2 holding clean lines of no use to the call.
    at::sum_out(scratch_sum_, scratch_view_);
    cudaDeviceSynchronize();
    lap(s.steps.evict);
    verify::Window w;
    w.caller_thread = devtime::this_thread_id();
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.clear();
      watching_ = true;
    }
    w.t0 = api_->now();
    cudaEventRecord(before_, nullptr);
    call();
    w.t_return = api_->now();
    cudaEventRecord(after_, nullptr);
    cudaEventSynchronize(after_);  // the caller's (legacy default) stream is done
    w.t_joined = api_->now();
    cudaDeviceSynchronize();  // and now everything else
    w.t1 = api_->now();
    lap(s.steps.window);
    api_->flush(true);
    {
      std::lock_guard<std::mutex> lock(mu_);
      watching_ = false;
      for (const auto& c : calls_) {
        if (c.time < w.t0) continue;
        if (c.launch) w.launches.push_back({c.time, c.thread});
        else
          w.environment.push_back(c.name);
      }
    }
    const auto window = collector_.take_timeline();
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    std::set<std::pair<uint32_t, uint32_t>> streams;
    for (const auto& [a, ext] : window.activities) {
      if (a.start < w.t0) continue;
      busy.emplace_back(a.start, a.end);
      streams.insert({a.device, a.stream});
      w.activities.push_back({a.start, a.end, a.stream, devtime::demangle(a.name)});
    }
    s.device_us = static_cast<double>(devtime::busy_ns(busy)) / 1000.0;
    s.activities = static_cast<int>(busy.size());
    s.streams = static_cast<int>(streams.size());
    s.findings = verify::inspect(w);
    float ms = 0;
    if (cudaEventElapsedTime(&ms, before_, after_) == cudaSuccess) s.events_us = ms * 1000.0;
    lap(s.steps.collect);
    return s;
  }

 private:
  static void on_call(const devtime::WatchedCall& c, void* self) {
    auto* t = static_cast<CuptiCudaTimer*>(self);
    std::lock_guard<std::mutex> lock(t->mu_);
    if (t->watching_ && t->calls_.size() < 100000) t->calls_.push_back(c);
  }

  // Best of ten device-to-device copies of 512 MB (read and write: 1 GB moved), timed by CUPTI.
  void measure_bandwidth() {
    void* big = nullptr;
    const size_t half = size_t{512} << 20;
    if (cudaMalloc(&big, 2 * half) != cudaSuccess) return;
    char* p = static_cast<char*>(big);
    double best = 0;
    for (int k = 0; k < 10; ++k) {
      CuptiCallSample s = time([&] { cudaMemcpyAsync(p + half, p, half, cudaMemcpyDeviceToDevice, nullptr); });
      if (s.device_us > 0) best = std::max(best, 2.0 * static_cast<double>(half) / s.device_us);
    }
    cudaFree(big);
    bandwidth_ = best;
  }

  static devtime::CollectorOptions options() {
    devtime::CollectorOptions o;
    o.attribute = false;
    o.timeline = true;
    o.timeline_max_events = 1u << 20;
    return o;
  }
  devtime::Collector collector_;
  std::unique_ptr<devtime::CuptiApi> api_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  at::Tensor scratch_view_, scratch_sum_;  // the scratch buffer as 8-byte words; where their sum goes
  cudaEvent_t before_ = nullptr, after_ = nullptr;
  double bandwidth_ = 0;  // bytes per µs
  bool flush_before_ = false;
  std::mutex mu_;
  bool watching_ = false;
  std::vector<devtime::WatchedCall> calls_;
};

}  // namespace

namespace {
std::atomic<int> g_cuda_poison{-1};  // the byte, or -1: off
}  // namespace

bool poison_cuda_allocations(int byte) {
  namespace cache = c10::cuda::CUDACachingAllocator;
  static const bool attached = [] {
    try {
      // (the allocator is made on first CUDA use: this makes sure there is one to attach to)
      (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
      // Called by the allocator, under its lock, for every event of every device's cache; only ALLOC (a block
      // handed out: its address and the size asked for) matters. The fill goes on the allocation's stream, so
      // it comes before whatever the caller queues there next (the kernel's writes included). A failed fill is
      // cleared, not left for the kernel's next CUDA call to report: that allocation keeps what it held.
      cache::attachAllocatorTraceTracker([](const c10::CachingDeviceAllocator::TraceEntry& e) {
        const int b = g_cuda_poison.load(std::memory_order_relaxed);
        if (b < 0 || e.action_ != c10::CachingDeviceAllocator::TraceEntry::ALLOC || e.size_ == 0) return;
        if (cudaMemsetAsync(reinterpret_cast<void*>(e.addr_), b, e.size_, static_cast<cudaStream_t>(e.stream_)) !=
            cudaSuccess)
          (void)cudaGetLastError();
      });
      return true;
    } catch (const std::exception&) {  // (e.g. the cudaMallocAsync backend: it has no trace trackers)
      return false;
    }
  }();
  if (!attached) return false;
  g_cuda_poison.store(byte < 0 ? -1 : (byte & 0xFF), std::memory_order_relaxed);
  return true;
}

std::unique_ptr<CuptiCallTimer> make_cupti_call_timer(int device, const std::string& torch_lib_dir, std::string* why) {
  auto t = std::make_unique<CuptiCudaTimer>();
  *why = t->init(device, torch_lib_dir);
  if (!why->empty()) return nullptr;
  return t;
}

uint64_t cuda_free_bytes() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();  // (not left for the next CUDA call to report)
    return 0;
  }
  return free;
}

}  // namespace bb::replay
