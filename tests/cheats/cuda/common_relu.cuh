// The honest part the CUDA cheats share: relu over float32, grid-stride.
#pragma once
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__global__ void cheat_relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = in[i];
    out[i] = v > 0.f || v != v ? v : 0.f;
  }
}

// Spins for about `cycles` clock ticks: work that keeps a stream busy after the call returns.
__global__ void cheat_spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

inline void cheat_check(const at::Tensor& x) {
  if (!x.is_cuda() || x.scalar_type() != at::kFloat) throw bb::Decline("CUDA float32 only");
}

// relu of x's first `count` elements into out's (all of them when count < 0).
inline void cheat_launch_relu(const at::Tensor& x, at::Tensor& out, cudaStream_t stream, int64_t count = -1) {
  const int64_t n = count < 0 ? x.numel() : count;
  if (n == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65535));
  cheat_relu_kernel<<<blocks, 256, 0, stream>>>(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
