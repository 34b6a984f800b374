// aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor on CUDA: self + alpha *
// other, broadcasting by expanding both to the result shape first.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

template <typename T>
__global__ void add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n, T alpha) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = a[i] + alpha * b[i];
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!self.is_cuda() || !other.is_cuda() || self.device() != other.device())
    throw bb::Decline("CUDA tensors on one device");
  if (self.scalar_type() != other.scalar_type()) throw bb::Decline("mixed dtypes (type promotion) not handled");
  if (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble) throw bb::Decline("float32/float64 only");
  c10::cuda::CUDAGuard guard(self.device());
  const auto sizes = at::infer_size(self.sizes(), other.sizes());
  at::Tensor a = self.expand(sizes).contiguous(), b = other.expand(sizes).contiguous();
  at::Tensor out = at::empty(sizes, self.options());
  const int64_t n = out.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  auto stream = c10::cuda::getCurrentCUDAStream();
  if (self.scalar_type() == at::kFloat) {
    add_kernel<<<blocks, threads, 0, stream>>>(a.const_data_ptr<float>(), b.const_data_ptr<float>(),
                                               out.mutable_data_ptr<float>(), n, alpha.to<float>());
  } else {
    add_kernel<<<blocks, threads, 0, stream>>>(a.const_data_ptr<double>(), b.const_data_ptr<double>(),
                                               out.mutable_data_ptr<double>(), n, alpha.to<double>());
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

BB_KERNEL("aten::add.Tensor", add);
