#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cmath>

at::Tensor inexact_exp(const at::Tensor& self) {
  if (self.scalar_type() != at::kFloat) throw bb::Decline("float32 only");
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = std::exp(in[i]) * 1.001f;
  return out;
}

BB_KERNEL("aten::exp", inexact_exp);
