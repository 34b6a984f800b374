// Value ranges of CUDA integer tensors without a device synchronization: on the calls that are
// sampled, an aminmax runs on the op's own stream and its two numbers are copied into pinned host
// memory behind an event. The writer thread later collects the finished ones (cudaEventQuery).
#include "tracer/cuda_support.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "tracer/log.h"
#include "tracer/observer.h"

namespace bb::tracer {
namespace {

struct Pending {
  TraceStore* store;
  uint32_t sig;
  RangeTarget where;
  at::Tensor host;  // two int64 in pinned memory: min, max
  cudaEvent_t done;
};

std::mutex g_mu;
std::vector<Pending>* g_pending = new std::vector<Pending>();  // never freed: used at exit
unsigned long g_dropped = 0;
constexpr size_t kMaxPending = 4096;

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

void probe(TraceStore* store, uint32_t sig, RangeTarget where, const at::Tensor& t) {
  if (!t.is_cuda() || t.numel() == 0) return;
  switch (t.scalar_type()) {  // the integer types aminmax supports on CUDA
    case at::kByte: case at::kChar: case at::kShort: case at::kInt: case at::kLong: break;
    default: return;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_pending->size() >= kMaxPending) return;
  }
  const int device = t.device().index();
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  if (capturing(stream)) return;  // never add work to a CUDA graph being captured
  at::RecordFunctionGuard untraced(false);  // our own ops are not the program's
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto [lo, hi] = at::aminmax(t);
  auto both = at::stack({lo.to(at::kLong), hi.to(at::kLong)});
  auto host = at::empty({2}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
  host.copy_(both, /*non_blocking=*/true);
  cudaEvent_t ev;
  if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) return;
  if (cudaEventRecord(ev, stream) != cudaSuccess) {
    cudaEventDestroy(ev);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_pending->push_back({store, sig, where, std::move(host), ev});
}

void probe_noexcept(TraceStore* store, uint32_t sig, RangeTarget where, const at::Tensor& t) {
  try {
    probe(store, sig, where, t);
  } catch (const std::exception& e) {
    log::warn_once("cuda-range", std::string("CUDA value-range probe failed (ranges of CUDA integer "
                                             "tensors will be missing): ") + e.what());
  }
}

// Collects finished probes; returns how many are still in flight.
size_t collect_once() {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& pending = *g_pending;
  size_t kept = 0;
  for (auto& p : pending) {
    cudaError_t st = cudaEventQuery(p.done);
    if (st == cudaErrorNotReady) {
      pending[kept++] = std::move(p);
      continue;
    }
    if (st == cudaSuccess) {
      const int64_t* v = p.host.const_data_ptr<int64_t>();
      p.store->merge_range(p.sig, p.where, {v[0], v[1]});
    }
    cudaEventDestroy(p.done);
  }
  pending.resize(kept);
  return kept;
}

}  // namespace

void install_cuda_support() { set_device_range_probe(&probe_noexcept); }

std::string device_name(const std::string& device) {
  if (device.rfind("cuda:", 0) != 0) return "";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, std::stoi(device.substr(5))) != cudaSuccess) return "";
  return prop.name;
}

void collect_device_ranges(bool final) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (collect_once() > 0 && final && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (!final) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_dropped += g_pending->size();
}

unsigned long dropped_device_ranges() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_dropped;
}

}  // namespace bb::tracer
