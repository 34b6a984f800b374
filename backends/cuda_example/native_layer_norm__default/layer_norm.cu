// aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
// float eps) -> (Tensor, Tensor, Tensor) on CUDA: one block per normalized row, two-pass mean and
// biased variance in double; returns the output, the mean and 1/sqrt(var + eps), the statistics
// shaped like the input's leading dims followed by ones, as native does.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <tuple>
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
__global__ void layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                  T* __restrict__ y, T* __restrict__ mean_out, T* __restrict__ rstd_out, int64_t n,
                                  double eps) {
  __shared__ double shared[kThreads];
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += xr[i];
  const double mean = block_sum(acc, shared) / n;
  acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += (xr[i] - mean) * (xr[i] - mean);
  const double rstd = rsqrt(block_sum(acc, shared) / n + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double v = (xr[i] - mean) * rstd;
    if (w) v *= w[i];
    if (b) v += b[i];
    yr[i] = static_cast<T>(v);
  }
  if (threadIdx.x == 0) {
    // as native's Welford: a row holding inf or NaN has NaN statistics
    mean_out[blockIdx.x] = static_cast<T>(isnan(rstd) ? nan("") : mean);
    rstd_out[blockIdx.x] = static_cast<T>(rstd);
  }
}

template <typename T>
const T* data_or_null(const std::optional<at::Tensor>& t) {
  return t ? t->const_data_ptr<T>() : nullptr;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 at::IntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  if (!input.is_cuda()) throw bb::Decline("CUDA kernel");
  if (input.scalar_type() != at::kFloat && input.scalar_type() != at::kDouble)
    throw bb::Decline("float32/float64 only");
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  if (axis < 0) throw bb::Decline("normalized_shape longer than the input");
  c10::cuda::CUDAGuard guard(input.device());
  int64_t n = 1;
  for (int64_t s : normalized_shape) n *= s;
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor x = input.contiguous();
  std::optional<at::Tensor> w, b;
  if (weight && weight->defined()) w = weight->contiguous();
  if (bias && bias->defined()) b = bias->contiguous();
  for (const auto* p : {&w, &b})
    if (*p && ((*p)->scalar_type() != x.scalar_type() || (*p)->numel() != n || (*p)->device() != x.device()))
      throw bb::Decline("weight/bias shape, dtype or device");
  at::Tensor y = at::empty(x.sizes(), x.options());
  at::Tensor mean = at::empty(stat_shape, x.options()), rstd = at::empty(stat_shape, x.options());
  const int64_t rows = n ? x.numel() / n : 0;
  if (rows > 0) {
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (x.scalar_type() == at::kFloat) {
      layer_norm_kernel<<<rows, kThreads, 0, stream>>>(
          x.const_data_ptr<float>(), data_or_null<float>(w), data_or_null<float>(b), y.mutable_data_ptr<float>(),
          mean.mutable_data_ptr<float>(), rstd.mutable_data_ptr<float>(), n, eps);
    } else {
      layer_norm_kernel<<<rows, kThreads, 0, stream>>>(
          x.const_data_ptr<double>(), data_or_null<double>(w), data_or_null<double>(b), y.mutable_data_ptr<double>(),
          mean.mutable_data_ptr<double>(), rstd.mutable_data_ptr<double>(), n, eps);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return {y, mean, rstd};
}

}  // namespace

BB_KERNEL("aten::native_layer_norm", native_layer_norm);
