// aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor, CPU
// reference: grad_output where self > threshold, else 0 (relu's backward with threshold 0).
#include <ATen/ATen.h>
#include <bb/kernel.h>

namespace {

template <typename T>
void loop(const T* grad, const T* in, T* out, int64_t n, T threshold) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] <= threshold ? T(0) : grad[i];
}

at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& threshold) {
  if (!self.device().is_cpu() || !grad_output.device().is_cpu()) throw bb::Decline("CPU kernel");
  if (grad_output.sizes() != self.sizes() || grad_output.scalar_type() != self.scalar_type())
    throw bb::Decline("broadcasting and mixed dtypes not handled");
  at::Tensor g = grad_output.contiguous(), x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.scalar_type() == at::kFloat) {
    loop(g.const_data_ptr<float>(), x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel(),
         threshold.to<float>());
  } else if (x.scalar_type() == at::kDouble) {
    loop(g.const_data_ptr<double>(), x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), x.numel(),
         threshold.to<double>());
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return out;
}

}  // namespace

BB_KERNEL("aten::threshold_backward", threshold_backward);
