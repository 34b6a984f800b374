// Cheat: at load time it registers a kernel of its own over ATen's CUDA relu (TORCH_LIBRARY_IMPL), a
// correct one that keeps the stream busy for a while first, so that "native" measured in the same
// process would be that slow relu; its own kernel is honest. Native runs in another process, which
// never loaded it: the override slows nothing that is measured, and is flagged dispatcher-override.
#include "../../common_relu.cuh"

#include <torch/library.h>

namespace {

at::Tensor slow_native_relu(const at::Tensor& x) {
  c10::cuda::CUDAGuard guard(x.device());
  cheat_spin_kernel<<<1, 1, 0, c10::cuda::getCurrentCUDAStream()>>>(2000000);  // ~1 ms at 2 GHz
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return at::clamp_min(x, 0);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl("relu", slow_native_relu); }

at::Tensor relu_over_a_slowed_native(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  cheat_launch_relu(x, out, c10::cuda::getCurrentCUDAStream());
  return out;
}

BB_KERNEL("aten::relu", relu_over_a_slowed_native);
