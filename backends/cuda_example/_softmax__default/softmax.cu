// aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor on CUDA: one block per row
// along `dim` (moved last): max, then sum of exp(x - max), then the quotients; double accumulation.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

constexpr int kThreads = 256;

template <bool kMax>
__device__ double block_reduce(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shared[threadIdx.x] =
          kMax ? fmax(shared[threadIdx.x], shared[threadIdx.x + s]) : shared[threadIdx.x] + shared[threadIdx.x + s];
    __syncthreads();
  }
  const double r = shared[0];
  __syncthreads();
  return r;
}

template <typename T>
__global__ void softmax_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n) {
  __shared__ double shared[kThreads];
  const T* x = in + blockIdx.x * n;
  T* y = out + blockIdx.x * n;
  double m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmax(m, static_cast<double>(x[i]));
  m = block_reduce<true>(m, shared);
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += exp(static_cast<double>(x[i]) - m);
  s = block_reduce<false>(s, shared);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = static_cast<T>(exp(static_cast<double>(x[i]) - m) / s);
}

at::Tensor _softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (!self.is_cuda()) throw bb::Decline("CUDA kernel");
  if (half_to_float) throw bb::Decline("half_to_float not handled");
  if (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble) throw bb::Decline("float32/float64 only");
  if (self.dim() == 0) throw bb::Decline("0-dim input");
  c10::cuda::CUDAGuard guard(self.device());
  dim = c10::maybe_wrap_dim(dim, self.dim());
  at::Tensor x = self.movedim(dim, -1).contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options());
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  if (rows > 0) {
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (x.scalar_type() == at::kFloat) {
      softmax_kernel<<<rows, kThreads, 0, stream>>>(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), n);
    } else {
      softmax_kernel<<<rows, kThreads, 0, stream>>>(x.const_data_ptr<double>(), y.mutable_data_ptr<double>(), n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return y.movedim(-1, dim).contiguous();
}

}  // namespace

BB_KERNEL("aten::_softmax", _softmax);
