// Cheat: computes in place in its input (saves an allocation; corrupts the caller's tensor).
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor relu_in_input(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_contiguous()) throw bb::Decline("contiguous float32 only");
  float* p = static_cast<float*>(x.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = p[i] > 0 ? p[i] : 0.0f;
  at::Tensor out = at::empty(x.sizes(), x.options());
  std::copy(p, p + x.numel(), out.mutable_data_ptr<float>());
  return out;
}

BB_KERNEL("aten::relu", relu_in_input);
