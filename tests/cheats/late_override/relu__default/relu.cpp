// Cheat: on its first call it registers a kernel over ATen's CPU relu (a torch::Library made at run
// time, as torch.library does from Python), a correct one that busy-waits, so that native calls made
// after it in the same process are slow. Flagged dispatcher-override at the end of that case.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <torch/library.h>

#include <chrono>

namespace {

at::Tensor slow_native_relu(const at::Tensor& x) {
  const auto t = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t < std::chrono::microseconds(200)) {
  }
  return at::clamp_min(x, 0);
}

}  // namespace

at::Tensor late_overriding_relu(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  static torch::Library* lib = [] {
    auto* l = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
    l->impl("relu", slow_native_relu);
    return l;
  }();
  (void)lib;
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

BB_KERNEL("aten::relu", late_overriding_relu);
