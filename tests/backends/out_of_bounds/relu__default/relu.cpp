// relu with an off-by-one loop bound: every result right, and one float written past the end of the
// output (what a missing tail mask does). Its results alone cannot show it.
#include <ATen/ATen.h>
#include <bb/kernel.h>

namespace {

at::Tensor relu(const at::Tensor& self) {
  if (!self.device().is_cpu() || self.scalar_type() != at::kFloat) throw bb::Decline("CPU float32");
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i <= n; ++i) o[i] = i < n && (in[i] > 0 || in[i] != in[i]) ? in[i] : 0.f;
  return out;
}

}  // namespace

BB_KERNEL("aten::relu", relu);
