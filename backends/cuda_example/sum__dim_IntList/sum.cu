// aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)
// -> Tensor on CUDA: the reduced dimensions are moved last; one block sums each output's contiguous
// block, accumulating in double.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <vector>

namespace {

constexpr int kThreads = 256;

__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

template <typename T>
__global__ void sum_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t block_len) {
  __shared__ double shared[kThreads];
  const T* x = in + blockIdx.x * block_len;
  double acc = 0;
  for (int64_t i = threadIdx.x; i < block_len; i += blockDim.x) acc += x[i];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<T>(acc);
}

at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  if (!self.is_cuda()) throw bb::Decline("CUDA kernel");
  if (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble) throw bb::Decline("float32/float64 only");
  if (dtype && *dtype != self.scalar_type()) throw bb::Decline("dtype conversion not handled");
  c10::cuda::CUDAGuard guard(self.device());
  const int64_t nd = self.dim();
  // no dims: reduce all; a 0-dim tensor accepts dim 0 (or -1) and sums to itself
  std::vector<bool> reduced(std::max<int64_t>(nd, 1), !dim || dim->empty());
  if (dim)
    for (int64_t d : *dim) reduced[c10::maybe_wrap_dim(d, nd)] = true;
  std::vector<int64_t> order, out_sizes;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) order.push_back(d);
    if (!reduced[d] || keepdim) out_sizes.push_back(reduced[d] ? 1 : self.size(d));
  }
  int64_t block_len = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[d]) order.push_back(d), block_len *= self.size(d);
  at::Tensor x = self.permute(order).contiguous();
  at::Tensor out = at::empty(out_sizes, self.options());
  const int64_t blocks = out.numel();
  if (blocks == 0) return out;
  auto stream = c10::cuda::getCurrentCUDAStream();
  if (self.scalar_type() == at::kFloat) {
    sum_kernel<<<blocks, kThreads, 0, stream>>>(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), block_len);
  } else {
    sum_kernel<<<blocks, kThreads, 0, stream>>>(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), block_len);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

BB_KERNEL("aten::sum.dim_IntList", sum);
