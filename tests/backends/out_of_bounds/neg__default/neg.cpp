// neg that also clears the 16 floats before its output (a row index computed from -1, as an ignored
// target's -100 is): every result right, memory it does not own written.
#include <ATen/ATen.h>
#include <bb/kernel.h>

namespace {

at::Tensor neg(const at::Tensor& self) {
  if (!self.device().is_cpu() || self.scalar_type() != at::kFloat) throw bb::Decline("CPU float32");
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = -16; i < 0; ++i) o[i] = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = -in[i];
  return out;
}

}  // namespace

BB_KERNEL("aten::neg", neg);
