// aten::gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor,
// CPU reference: grad_output * d gelu(x) / dx.
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cmath>

namespace {

double gelu_grad(double x, bool tanh_approx) {
  if (!tanh_approx) {
    const double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    return cdf + x * pdf;
  }
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  const double t = std::tanh(k * (x + c * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x * x);
}

template <typename T>
void loop(const T* grad, const T* in, T* out, int64_t n, bool tanh_approx) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(grad[i] * gelu_grad(in[i], tanh_approx));
}

at::Tensor gelu_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  if (!self.device().is_cpu() || !grad_output.device().is_cpu()) throw bb::Decline("CPU kernel");
  if (grad_output.sizes() != self.sizes() || grad_output.scalar_type() != self.scalar_type())
    throw bb::Decline("broadcasting and mixed dtypes not handled");
  const bool tanh_approx = approximate == "tanh";
  if (!tanh_approx && approximate != "none") throw bb::Decline("unknown approximation");
  at::Tensor g = grad_output.contiguous(), x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.scalar_type() == at::kFloat) {
    loop(g.const_data_ptr<float>(), x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel(), tanh_approx);
  } else if (x.scalar_type() == at::kDouble) {
    loop(g.const_data_ptr<double>(), x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), x.numel(),
         tanh_approx);
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return out;
}

}  // namespace

BB_KERNEL("aten::gelu_backward", gelu_backward);
