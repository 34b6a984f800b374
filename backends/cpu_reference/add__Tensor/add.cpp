// aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor, CPU reference:
// self + alpha * other, with broadcasting.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <bb/kernel.h>

namespace {

template <typename T>
void add_loop(const T* a, const T* b, T* out, int64_t n, T alpha) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + alpha * b[i];
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!self.device().is_cpu() || !other.device().is_cpu()) throw bb::Decline("CPU kernel");
  if (self.scalar_type() != other.scalar_type()) throw bb::Decline("mixed dtypes (type promotion) not handled");
  const auto sizes = at::infer_size(self.sizes(), other.sizes());
  at::Tensor a = self.expand(sizes).contiguous();
  at::Tensor b = other.expand(sizes).contiguous();
  at::Tensor out = at::empty(sizes, self.options());
  if (self.scalar_type() == at::kFloat) {
    add_loop(a.const_data_ptr<float>(), b.const_data_ptr<float>(), out.mutable_data_ptr<float>(), out.numel(),
             alpha.to<float>());
  } else if (self.scalar_type() == at::kDouble) {
    add_loop(a.const_data_ptr<double>(), b.const_data_ptr<double>(), out.mutable_data_ptr<double>(), out.numel(),
             alpha.to<double>());
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return out;
}

}  // namespace

BB_KERNEL("aten::add.Tensor", add);
