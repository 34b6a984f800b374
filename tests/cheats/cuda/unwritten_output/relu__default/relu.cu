// Cheat: writes only the first half of its output. The rest holds whatever the caching allocator's
// block held — in a benchmark loop often an earlier, correct result, so a check that compares only
// once, on reused memory, passes it.
#include "../../common_relu.cuh"

at::Tensor half_relu(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  cheat_launch_relu(x, out, c10::cuda::getCurrentCUDAStream(), x.numel() / 2);
  return out;
}

BB_KERNEL("aten::relu", half_relu);
