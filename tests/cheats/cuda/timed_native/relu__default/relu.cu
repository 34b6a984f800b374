// Cheat: honest on the two calls a replay checks for each shape (its first and a second set of input
// values), at::relu from the third on: the warm-ups and the timed runs measure ATen.
#include "../../common_relu.cuh"

#include <map>
#include <vector>

at::Tensor relu_native_when_timed(const at::Tensor& self) {
  cheat_check(self);
  static std::map<std::vector<int64_t>, int> calls;
  if (++calls[self.sizes().vec()] > 2) return at::relu(self);
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  cheat_launch_relu(x, out, c10::cuda::getCurrentCUDAStream());
  return out;
}

BB_KERNEL("aten::relu", relu_native_when_timed);
