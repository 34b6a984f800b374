// aten::relu(Tensor self) -> Tensor, CPU reference: max(x, 0) elementwise.
#include <ATen/ATen.h>
#include <bb/kernel.h>

namespace {

template <typename T>
void relu_loop(const T* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > T(0) ? in[i] : (in[i] != in[i] ? in[i] : T(0));  // NaN stays NaN
}

at::Tensor relu(const at::Tensor& self) {
  if (!self.device().is_cpu()) throw bb::Decline("CPU kernel");
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.scalar_type() == at::kFloat) {
    relu_loop(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
  } else if (x.scalar_type() == at::kDouble) {
    relu_loop(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), x.numel());
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return out;
}

}  // namespace

BB_KERNEL("aten::relu", relu);
