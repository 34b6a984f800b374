// aten::gelu(Tensor self, *, str approximate='none') -> Tensor on CUDA, elementwise.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

template <typename T>
__global__ void gelu_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n, bool tanh_approx) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  const T inv_sqrt2 = T(0.7071067811865476);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const T x = in[i];
    out[i] = tanh_approx ? T(0.5) * x * (T(1) + tanh(k * (x + T(0.044715) * x * x * x)))
                         : T(0.5) * x * (T(1) + erf(x * inv_sqrt2));
  }
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  if (!self.is_cuda()) throw bb::Decline("CUDA kernel");
  if (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble) throw bb::Decline("float32/float64 only");
  const bool tanh_approx = approximate == "tanh";
  if (!tanh_approx && approximate != "none") throw bb::Decline("unknown approximation");
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const int64_t n = x.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  auto stream = c10::cuda::getCurrentCUDAStream();
  if (x.scalar_type() == at::kFloat) {
    gelu_kernel<<<blocks, threads, 0, stream>>>(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n,
                                                tanh_approx);
  } else {
    gelu_kernel<<<blocks, threads, 0, stream>>>(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), n,
                                                tanh_approx);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

BB_KERNEL("aten::gelu", gelu);
