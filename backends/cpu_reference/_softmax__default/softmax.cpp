// aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor, CPU reference: per row along
// `dim`, exp(x - max) / sum(exp(x - max)).
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cmath>
#include <limits>

namespace {

template <typename T>
void softmax_rows(const T* in, T* out, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * n;
    T* y = out + r * n;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::max<double>(max, x[i]);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += std::exp(x[i] - max);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(std::exp(x[i] - max) / total);
  }
}

at::Tensor _softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (!self.device().is_cpu()) throw bb::Decline("CPU kernel");
  if (half_to_float) throw bb::Decline("half_to_float not handled");
  if (self.dim() == 0) throw bb::Decline("0-dim input");
  dim = c10::maybe_wrap_dim(dim, self.dim());
  at::Tensor x = self.movedim(dim, -1).contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options());
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  if (self.scalar_type() == at::kFloat) {
    softmax_rows(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), rows, n);
  } else if (self.scalar_type() == at::kDouble) {
    softmax_rows(x.const_data_ptr<double>(), y.mutable_data_ptr<double>(), rows, n);
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return y.movedim(-1, dim).contiguous();
}

}  // namespace

BB_KERNEL("aten::_softmax", _softmax);
