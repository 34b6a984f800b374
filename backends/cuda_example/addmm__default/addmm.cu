// aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor on
// CUDA: beta * self + alpha * (mat1 @ mat2) with 16x16 shared-memory tiles; self is broadcast to
// [n, m] and not read when beta == 0.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

constexpr int kTile = 16;

template <typename T>
__global__ void addmm_kernel(const T* __restrict__ bias, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ c, int64_t n, int64_t k, int64_t m, T beta, T alpha) {
  __shared__ T as[kTile][kTile];
  __shared__ T bs[kTile][kTile];
  const int64_t row = blockIdx.y * (int64_t)kTile + threadIdx.y;
  const int64_t col = blockIdx.x * (int64_t)kTile + threadIdx.x;
  T acc = 0;
  for (int64_t t = 0; t < k; t += kTile) {
    as[threadIdx.y][threadIdx.x] = row < n && t + threadIdx.x < k ? a[row * k + t + threadIdx.x] : T(0);
    bs[threadIdx.y][threadIdx.x] = t + threadIdx.y < k && col < m ? b[(t + threadIdx.y) * m + col] : T(0);
    __syncthreads();
    for (int p = 0; p < kTile; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < m) c[row * m + col] = alpha * acc + (beta == T(0) ? T(0) : beta * bias[row * m + col]);
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  for (const auto* t : {&self, &mat1, &mat2})
    if (!t->is_cuda() || t->device() != mat1.device() || t->scalar_type() != mat1.scalar_type())
      throw bb::Decline("CUDA tensors of one dtype on one device");
  if (mat1.scalar_type() != at::kFloat && mat1.scalar_type() != at::kDouble) throw bb::Decline("float32/float64 only");
  if (mat1.dim() != 2 || mat2.dim() != 2 || mat1.size(1) != mat2.size(0)) throw bb::Decline("shapes");
  c10::cuda::CUDAGuard guard(mat1.device());
  const int64_t n = mat1.size(0), k = mat1.size(1), m = mat2.size(1);
  if ((n + kTile - 1) / kTile > 65535) throw bb::Decline("too many rows for one grid");
  at::Tensor bias = self.expand({n, m}).contiguous();
  at::Tensor a = mat1.contiguous(), b = mat2.contiguous();
  at::Tensor out = at::empty({n, m}, mat1.options());
  if (n == 0 || m == 0) return out;
  const dim3 threads(kTile, kTile), blocks((m + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  auto stream = c10::cuda::getCurrentCUDAStream();
  if (mat1.scalar_type() == at::kFloat) {
    addmm_kernel<<<blocks, threads, 0, stream>>>(bias.const_data_ptr<float>(), a.const_data_ptr<float>(),
                                                 b.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n, k, m,
                                                 beta.to<float>(), alpha.to<float>());
  } else {
    addmm_kernel<<<blocks, threads, 0, stream>>>(bias.const_data_ptr<double>(), a.const_data_ptr<double>(),
                                                 b.const_data_ptr<double>(), out.mutable_data_ptr<double>(), n, k, m,
                                                 beta.to<double>(), alpha.to<double>());
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

BB_KERNEL("aten::addmm", addmm);
