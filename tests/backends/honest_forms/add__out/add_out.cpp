// aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!): writes
// `out`, resized to the result's shape as ATen does, and returns it. Float32, same shapes.
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  if (!self.device().is_cpu() || self.scalar_type() != at::kFloat || other.scalar_type() != at::kFloat ||
      out.scalar_type() != at::kFloat || self.sizes() != other.sizes())
    throw bb::Decline("same-shape CPU float32 only");
  if (out.sizes() != self.sizes()) out.resize_(self.sizes());
  if (!out.is_contiguous()) throw bb::Decline("contiguous out only");
  const at::Tensor a = self.contiguous(), b = other.contiguous();
  const float s = alpha.to<float>();
  const float *p = a.const_data_ptr<float>(), *q = b.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) o[i] = p[i] + s * q[i];
  return out;
}

BB_KERNEL("aten::add.out", add_out);
