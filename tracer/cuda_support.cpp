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
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tracer/log.h"
#include "tracer/observer.h"

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

std::mutex g_mu;  // guards everything below
std::vector<Pending>* g_pending = new std::vector<Pending>();  // never freed: used at exit
std::vector<int>* g_free = new std::vector<int>();
int64_t* g_slots = nullptr;  // kSlots x {min, max} in pinned memory
std::map<std::string, std::string>* g_names = new std::map<std::string, std::string>();
unsigned long g_dropped = 0;
std::atomic<bool> g_closed{false};  // the program is exiting: no more CUDA calls

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

int take_slot() {  // call with g_mu held
  if (!g_slots) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, sizeof(int64_t) * 2 * kSlots, cudaHostAllocDefault) != cudaSuccess) return -1;
    g_slots = static_cast<int64_t*>(p);
    for (int i = kSlots - 1; i >= 0; --i) g_free->push_back(i);
  }
  if (g_free->empty()) return -1;
  int slot = g_free->back();
  g_free->pop_back();
  return slot;
}

void probe(TraceStore* store, uint32_t sig, RangeTarget where, const at::Tensor& t) {
  if (g_closed.load() || !t.is_cuda() || t.numel() == 0) return;
  switch (t.scalar_type()) {  // the integer types aminmax supports on CUDA
    case at::kByte: case at::kChar: case at::kShort: case at::kInt: case at::kLong: break;
    default: return;
  }
  const auto device = t.device().index();
  c10::cuda::CUDAGuard guard(device);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  if (capturing(stream)) return;  // never add work to a CUDA graph being captured
  int slot;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    slot = take_slot();
  }
  if (slot < 0) return;
  at::RecordFunctionGuard untraced(false);  // our own ops are not the program's
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto [lo, hi] = at::aminmax(t);
  at::Tensor both = at::stack({lo.to(at::kLong), hi.to(at::kLong)});
  cudaEvent_t ev = nullptr;
  bool ok = cudaMemcpyAsync(g_slots + 2 * slot, both.const_data_ptr(), 2 * sizeof(int64_t),
                            cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
            cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess &&
            cudaEventRecord(ev, stream) == cudaSuccess;
  std::lock_guard<std::mutex> lock(g_mu);
  if (ok) {
    g_pending->push_back({store, sig, where, slot, ev});
  } else {
    if (ev) cudaEventDestroy(ev);
    g_free->push_back(slot);
  }
}

void probe_noexcept(TraceStore* store, uint32_t sig, RangeTarget where, const at::Tensor& t) {
  try {
    probe(store, sig, where, t);
  } catch (const std::exception& e) {
    log::warn_once("cuda-range", std::string("CUDA value-range probe failed (ranges of CUDA integer "
                                             "tensors will be missing): ") + e.what());
  }
}

struct Finished {
  TraceStore* store;
  uint32_t sig;
  RangeTarget where;
  IntRange range;
};

// Takes the finished probes out; returns how many are still in flight. Call with g_mu held. The
// results are merged into their stores after g_mu is released (the store's lock is never taken
// inside g_mu, nor g_mu inside it).
size_t collect_locked(std::vector<Finished>& done) {
  auto& pending = *g_pending;
  size_t kept = 0;
  for (auto& p : pending) {
    cudaError_t st = cudaEventQuery(p.done);
    if (st == cudaErrorNotReady) {
      pending[kept++] = p;
      continue;
    }
    if (st == cudaSuccess) done.push_back({p.store, p.sig, p.where, {g_slots[2 * p.slot], g_slots[2 * p.slot + 1]}});
    cudaEventDestroy(p.done);
    g_free->push_back(p.slot);
  }
  pending.resize(kept);
  return kept;
}

void merge(const std::vector<Finished>& done) {
  for (const auto& f : done) f.store->merge_range(f.sig, f.where, f.range);
}

pid_t g_owner_pid = 0;  // the process whose CUDA context the probes use

// Runs at exit before the CUDA runtime's own teardown: last collection, waiting up to 200 ms.
// Never in a forked child (CUDA cannot be used there) and never twice.
void drain_before_cuda_exits() {
  if (::getpid() != g_owner_pid || g_closed.load()) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (;;) {
    std::vector<Finished> done;
    bool last;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      last = collect_locked(done) == 0 || std::chrono::steady_clock::now() >= deadline;
      if (last) {
        g_dropped += g_pending->size();
        g_closed.store(true);
      }
    }
    merge(done);
    if (last) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void on_device(const std::string& device) {
  if (device.rfind("cuda:", 0) != 0 || g_closed.load()) return;
  static std::once_flag registered;
  std::call_once(registered, [] {
    g_owner_pid = ::getpid();
    std::atexit(&drain_before_cuda_exits);
  });
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, std::stoi(device.substr(5))) != cudaSuccess) return;
  std::lock_guard<std::mutex> lock(g_mu);
  (*g_names)[device] = prop.name;
}

}  // namespace

void install_cuda_support() {
  set_device_range_probe(&probe_noexcept);
  set_device_listener(&on_device);
}

std::string device_name(const std::string& device) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_names->find(device);
  return it == g_names->end() ? "" : it->second;
}

void collect_device_ranges(bool final) {
  if (final) drain_before_cuda_exits();
  if (g_closed.load() || ::getpid() != g_owner_pid) return;
  std::vector<Finished> done;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    collect_locked(done);
  }
  merge(done);
}

unsigned long dropped_device_ranges() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_dropped;
}

}  // namespace bb::tracer
