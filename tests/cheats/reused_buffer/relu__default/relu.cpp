// Cheat: keeps one output buffer and returns it on every call (the previous result changes under
// whoever still holds it).
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor relu_into_static(const at::Tensor& x) {
  static at::Tensor buffer;
  if (x.scalar_type() != at::kFloat) throw bb::Decline("float32 only");
  if (!buffer.defined() || buffer.sizes() != x.sizes()) buffer = at::empty(x.sizes(), x.options());
  at::Tensor c = x.contiguous();
  const float* in = c.const_data_ptr<float>();
  float* o = buffer.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 ? in[i] : 0.0f;
  return buffer;
}

BB_KERNEL("aten::relu", relu_into_static);
