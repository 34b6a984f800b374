// aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor on CUDA:
// grad_output where self > threshold, else 0.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

template <typename T>
__global__ void threshold_backward_kernel(const T* __restrict__ grad, const T* __restrict__ in, T* __restrict__ out,
                                          int64_t n, T threshold) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = in[i] <= threshold ? T(0) : grad[i];
}

at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& threshold) {
  if (!self.is_cuda() || !grad_output.is_cuda()) throw bb::Decline("CUDA kernel");
  if (grad_output.sizes() != self.sizes() || grad_output.scalar_type() != self.scalar_type())
    throw bb::Decline("broadcasting and mixed dtypes not handled");
  if (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble) throw bb::Decline("float32/float64 only");
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor g = grad_output.contiguous(), x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const int64_t n = x.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  auto stream = c10::cuda::getCurrentCUDAStream();
  if (x.scalar_type() == at::kFloat) {
    threshold_backward_kernel<<<blocks, threads, 0, stream>>>(g.const_data_ptr<float>(), x.const_data_ptr<float>(),
                                                              out.mutable_data_ptr<float>(), n, threshold.to<float>());
  } else {
    threshold_backward_kernel<<<blocks, threads, 0, stream>>>(g.const_data_ptr<double>(), x.const_data_ptr<double>(),
                                                              out.mutable_data_ptr<double>(), n,
                                                              threshold.to<double>());
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

BB_KERNEL("aten::threshold_backward", threshold_backward);
