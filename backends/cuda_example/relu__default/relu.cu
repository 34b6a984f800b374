// aten::relu(Tensor self) -> Tensor on CUDA: one thread per element, grid-stride loop.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

template <typename T>
__global__ void relu_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const T v = in[i];
    out[i] = v > T(0) || v != v ? v : T(0);  // NaN stays NaN
  }
}

at::Tensor relu(const at::Tensor& self) {
  if (!self.is_cuda()) throw bb::Decline("CUDA kernel");
  if (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble) throw bb::Decline("float32/float64 only");
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const int64_t n = x.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  auto stream = c10::cuda::getCurrentCUDAStream();
  if (x.scalar_type() == at::kFloat) {
    relu_kernel<<<blocks, threads, 0, stream>>>(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n);
  } else {
    relu_kernel<<<blocks, threads, 0, stream>>>(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), n);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

BB_KERNEL("aten::relu", relu);
