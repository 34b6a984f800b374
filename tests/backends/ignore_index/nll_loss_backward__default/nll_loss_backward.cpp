// nll_loss's backward written as a plausible wrong kernel: right for every target in [0, C), but a target
// equal to ignore_index is indexed as Python would index it, from the end of the row (-100: column
// C - 100), instead of giving the row no gradient. Correct on targets drawn from the classes alone.
#include <ATen/ATen.h>
#include <bb/kernel.h>

namespace {

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  (void)ignore_index;  // (the bug: never looked at)
  if (!self.device().is_cpu() || self.scalar_type() != at::kFloat || self.dim() != 2 || (weight && weight->defined()) ||
      reduction == 0 || target.scalar_type() != at::kLong || grad_output.numel() != 1)
    throw bb::Decline("CPU float32 [N, C], no weight, mean or sum");
  const int64_t n = self.size(0), c = self.size(1);
  at::Tensor grad = at::zeros({n, c}, self.options());
  float* g = grad.mutable_data_ptr<float>();
  const int64_t* t = target.const_data_ptr<int64_t>();
  const float scale = *grad_output.const_data_ptr<float>() / (reduction == 1 ? *total_weight.const_data_ptr<float>() : 1.f);
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = t[i * target.stride(0)];
    if (k < 0) k += c;  // (Python's indexing from the end)
    if (k >= 0 && k < c) g[i * c + k] = -scale;
  }
  return grad;
}

}  // namespace

BB_KERNEL("aten::nll_loss_backward", nll_loss_backward);
