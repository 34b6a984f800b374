// tanh as expm1(2x) / (expm1(2x) + 2): exact enough for |x| up to about 44, where expm1(2x) overflows
// float32 and the quotient is inf / inf = NaN although tanh(x) is 1. NaN and ±inf inputs are handled
// as tanh does, so only inputs of large finite magnitude show the bug (a red-team kernel of 2026-12-04).
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cmath>

at::Tensor overflowing_tanh(const at::Tensor& self) {
  if (self.scalar_type() != at::kFloat) throw bb::Decline("float32 only");
  at::Tensor x = self.contiguous(), out = at::empty(self.sizes(), self.options());
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = in[i];
    if (std::isnan(v) || std::isinf(v)) {
      o[i] = std::isnan(v) ? v : (v > 0 ? 1.0f : -1.0f);
      continue;
    }
    const float e = std::expm1(2.0f * v);
    o[i] = e / (e + 2.0f);
  }
  return out;
}

BB_KERNEL("aten::tanh", overflowing_tanh);
