// Cheat: at load time it registers a kernel of its own over ATen's CPU relu (TORCH_LIBRARY_IMPL), a
// correct one that busy-waits first, so that "native" in the same process is that slow relu; its own
// kernel is an honest scalar loop. Native runs in another process now: the override slows nothing that
// is measured, and is flagged dispatcher-override by name.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <torch/library.h>

#include <chrono>

namespace {

at::Tensor scalar_relu(const at::Tensor& x) {
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

at::Tensor slow_native_relu(const at::Tensor& x) {
  const auto t = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t < std::chrono::microseconds(200)) {
  }
  return at::clamp_min(x, 0);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("relu", slow_native_relu); }

at::Tensor overriding_relu(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  return scalar_relu(x);
}

BB_KERNEL("aten::relu", overriding_relu);
