// aten::gelu(Tensor self, *, str approximate='none') -> Tensor, CPU reference.
//   none: 0.5 x (1 + erf(x / sqrt 2));  tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cmath>

namespace {

template <typename T>
void gelu_loop(const T* in, T* out, int64_t n, bool tanh_approx) {
  const double k = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    const double y = tanh_approx ? 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)))
                                 : 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    out[i] = static_cast<T>(y);
  }
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  if (!self.device().is_cpu()) throw bb::Decline("CPU kernel");
  const bool tanh_approx = approximate == "tanh";
  if (!tanh_approx && approximate != "none") throw bb::Decline("unknown approximation");
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.scalar_type() == at::kFloat) {
    gelu_loop(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel(), tanh_approx);
  } else if (x.scalar_type() == at::kDouble) {
    gelu_loop(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), x.numel(), tanh_approx);
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return out;
}

}  // namespace

BB_KERNEL("aten::gelu", gelu);
