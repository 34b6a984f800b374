// Cheat: sets aside L2 for persisting accesses during the call (what its timing then depends on is no
// longer the device every other kernel runs on). The relu itself is honest.
#include "../../common_relu.cuh"

at::Tensor relu_with_l2_set_aside(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 4 << 20);
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  cheat_launch_relu(x, out, c10::cuda::getCurrentCUDAStream());
  cudaCtxResetPersistingL2Cache();
  return out;
}

BB_KERNEL("aten::relu", relu_with_l2_set_aside);
