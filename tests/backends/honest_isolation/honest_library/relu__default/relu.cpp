// Honest: its static initializers define and implement a NEW op in a library namespace of its own
// (bbhonest::relu_scalar, torch::Library DEF and IMPL at load time: what a kernel package that also
// exposes its op to Python does), never an aten one. The relu kernel calls that implementation as a
// C++ function, not through the dispatcher. It must pass, unflagged (no dispatcher-override), and be
// timed.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <torch/library.h>

namespace {

at::Tensor relu_scalar(const at::Tensor& x) {
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

}  // namespace

TORCH_LIBRARY(bbhonest, m) { m.def("relu_scalar(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(bbhonest, CPU, m) { m.impl("relu_scalar", relu_scalar); }

at::Tensor relu_from_own_library(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  return relu_scalar(x);
}

BB_KERNEL("aten::relu", relu_from_own_library);
