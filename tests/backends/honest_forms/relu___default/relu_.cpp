// aten::relu_(Tensor(a!) self) -> Tensor(a!): in place, float32, any strides (walked element by element).
#include <ATen/ATen.h>
#include <bb/kernel.h>

namespace {

void relu_strided(float* p, const at::Tensor& t, int64_t dim) {
  if (dim == t.dim()) {
    *p = *p > 0 || *p != *p ? *p : 0.0f;
    return;
  }
  for (int64_t i = 0; i < t.size(dim); ++i) relu_strided(p + i * t.stride(dim), t, dim + 1);
}

at::Tensor& relu_in_place(at::Tensor& self) {
  if (!self.device().is_cpu() || self.scalar_type() != at::kFloat) throw bb::Decline("CPU float32 only");
  if (self.numel() > 0) relu_strided(self.mutable_data_ptr<float>(), self, 0);
  return self;
}

}  // namespace

BB_KERNEL("aten::relu_", relu_in_place);
