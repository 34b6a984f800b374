// aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)
// -> Tensor, CPU reference: the reduced dimensions are moved last, each output element sums one
// contiguous block, accumulating in double.
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <algorithm>
#include <vector>

namespace {

template <typename T>
void sum_blocks(const T* in, T* out, int64_t blocks, int64_t block) {
  for (int64_t b = 0; b < blocks; ++b) {
    double acc = 0;
    for (int64_t i = 0; i < block; ++i) acc += in[b * block + i];
    out[b] = static_cast<T>(acc);
  }
}

at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  if (!self.device().is_cpu()) throw bb::Decline("CPU kernel");
  if (dtype && *dtype != self.scalar_type()) throw bb::Decline("dtype conversion not handled");
  const int64_t nd = self.dim();
  // no dims: reduce all; a 0-dim tensor accepts dim 0 (or -1) and sums to itself
  std::vector<bool> reduced(std::max<int64_t>(nd, 1), !dim || dim->empty());
  if (dim)
    for (int64_t d : *dim) reduced[c10::maybe_wrap_dim(d, nd)] = true;
  std::vector<int64_t> order, out_sizes, kept_sizes;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) order.push_back(d), kept_sizes.push_back(self.size(d));
    if (!reduced[d] || keepdim) out_sizes.push_back(reduced[d] ? 1 : self.size(d));
  }
  int64_t block = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[d]) order.push_back(d), block *= self.size(d);
  at::Tensor x = self.permute(order).contiguous();
  at::Tensor out = at::empty(out_sizes, self.options());
  const int64_t blocks = out.numel();
  if (self.scalar_type() == at::kFloat) {
    sum_blocks(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), blocks, block);
  } else if (self.scalar_type() == at::kDouble) {
    sum_blocks(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), blocks, block);
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return out;
}

}  // namespace

BB_KERNEL("aten::sum.dim_IntList", sum);
