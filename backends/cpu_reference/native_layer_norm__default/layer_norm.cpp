// aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
// float eps) -> (Tensor, Tensor, Tensor), CPU reference. Returns the output and, per normalized
// row, the mean and 1/sqrt(var + eps) (biased variance), shaped like the input's leading dims
// followed by ones, as native does.
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace {

template <typename T>
void layer_norm_rows(const T* x, const T* w, const T* b, T* y, T* mean_out, T* rstd_out, int64_t rows, int64_t n,
                     double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += xr[i];
    mean /= n;
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= n;
    if (std::isnan(var)) mean = NAN;  // as native's Welford: a row holding inf or NaN has NaN statistics
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i) {
      double v = (xr[i] - mean) * rstd;
      if (w) v *= w[i];
      if (b) v += b[i];
      y[r * n + i] = static_cast<T>(v);
    }
    mean_out[r] = static_cast<T>(mean);
    rstd_out[r] = static_cast<T>(rstd);
  }
}

template <typename T>
const T* data_or_null(const std::optional<at::Tensor>& t) {
  return t && t->defined() ? t->const_data_ptr<T>() : nullptr;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 at::IntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  if (!input.device().is_cpu()) throw bb::Decline("CPU kernel");
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  if (axis < 0) throw bb::Decline("normalized_shape longer than the input");
  int64_t n = 1;
  for (int64_t s : normalized_shape) n *= s;
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor x = input.contiguous();
  std::optional<at::Tensor> w =
      weight && weight->defined() ? std::optional<at::Tensor>(weight->contiguous()) : std::nullopt;
  std::optional<at::Tensor> b = bias && bias->defined() ? std::optional<at::Tensor>(bias->contiguous()) : std::nullopt;
  for (const auto* p : {&w, &b})
    if (*p && ((*p)->scalar_type() != x.scalar_type() || (*p)->numel() != n))
      throw bb::Decline("weight/bias shape or dtype");
  at::Tensor y = at::empty(x.sizes(), x.options());
  at::Tensor mean = at::empty(stat_shape, x.options()), rstd = at::empty(stat_shape, x.options());
  const int64_t rows = n ? x.numel() / n : 0;
  if (x.scalar_type() == at::kFloat) {
    layer_norm_rows(x.const_data_ptr<float>(), data_or_null<float>(w), data_or_null<float>(b),
                    y.mutable_data_ptr<float>(), mean.mutable_data_ptr<float>(), rstd.mutable_data_ptr<float>(), rows,
                    n, eps);
  } else if (x.scalar_type() == at::kDouble) {
    layer_norm_rows(x.const_data_ptr<double>(), data_or_null<double>(w), data_or_null<double>(b),
                    y.mutable_data_ptr<double>(), mean.mutable_data_ptr<double>(), rstd.mutable_data_ptr<double>(),
                    rows, n, eps);
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return {y, mean, rstd};
}

}  // namespace

BB_KERNEL("aten::native_layer_norm", native_layer_norm);
