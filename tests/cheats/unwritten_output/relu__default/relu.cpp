// Cheat: writes only the first half of its output (the rest holds whatever the memory held, which in
// a benchmark loop is often the previous, correct result).
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor half_relu(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat) throw bb::Decline("float32 only");
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel() / 2; ++i) o[i] = in[i] > 0 ? in[i] : 0.0f;
  return out;
}

BB_KERNEL("aten::relu", half_relu);
