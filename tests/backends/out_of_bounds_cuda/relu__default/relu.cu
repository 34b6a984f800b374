// relu with an off-by-one bound on CUDA: every result right, and one float written past the end of the
// output (what a missing tail mask does). Its results alone cannot show it.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

__global__ void relu_one_past(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i <= n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = i < n && (in[i] > 0.f || in[i] != in[i]) ? in[i] : 0.f;
}

at::Tensor relu(const at::Tensor& self) {
  if (!self.is_cuda() || self.scalar_type() != at::kFloat) throw bb::Decline("CUDA float32");
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const int64_t n = x.numel();
  const int blocks = static_cast<int>(std::min<int64_t>(n / 256 + 1, 65535));
  relu_one_past<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(x.const_data_ptr<float>(),
                                                                       out.mutable_data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

BB_KERNEL("aten::relu", relu);
