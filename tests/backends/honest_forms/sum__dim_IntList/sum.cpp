// aten::sum.dim_IntList over the last dimension of a 2-d float32 tensor, accumulating in float32 from
// the first element to the last (ATen sums in another order, in vectorized partial sums): rounding
// differs from native's, within what float32 allows.
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor sum_last(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  if (!self.device().is_cpu() || self.scalar_type() != at::kFloat || self.dim() != 2 || dtype || keepdim || !dim ||
      dim->size() != 1 || c10::maybe_wrap_dim((*dim)[0], 2) != 1)
    throw bb::Decline("2-d CPU float32 over the last dimension only");
  const at::Tensor x = self.contiguous();
  at::Tensor out = at::empty({x.size(0)}, x.options());
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t r = 0; r < x.size(0); ++r) {
    float acc = 0;
    for (int64_t c = 0; c < x.size(1); ++c) acc += in[r * x.size(1) + c];
    o[r] = acc;
  }
  return out;
}

BB_KERNEL("aten::sum.dim_IntList", sum_last);
