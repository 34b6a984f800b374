// aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!): in place,
// float32, `other` of self's shape (or broadcast from fewer elements: declined).
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor& add_in_place(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!self.device().is_cpu() || self.scalar_type() != at::kFloat || other.scalar_type() != at::kFloat ||
      self.sizes() != other.sizes() || !self.is_contiguous())
    throw bb::Decline("contiguous same-shape CPU float32 only");
  const at::Tensor b = other.contiguous();
  const float a = alpha.to<float>();
  float* p = self.mutable_data_ptr<float>();
  const float* q = b.const_data_ptr<float>();
  for (int64_t i = 0; i < self.numel(); ++i) p[i] += a * q[i];
  return self;
}

BB_KERNEL("aten::add_.Tensor", add_in_place);
