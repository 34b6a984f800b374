// Cheat: honest on the two checked calls per shape, then returns its input without launching anything
// in warm-ups and timed runs: a harness that judges aliasing on the checked calls only times a no-op.
#include "../../common_relu.cuh"

#include <map>
#include <vector>

at::Tensor late_alias_relu(const at::Tensor& self) {
  static std::map<std::vector<int64_t>, int> calls;
  cheat_check(self);
  if (++calls[self.sizes().vec()] > 2) return self;
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous(), out = at::empty_like(x);
  cheat_launch_relu(x, out, c10::cuda::getCurrentCUDAStream());
  return out;
}

BB_KERNEL("aten::relu", late_alias_relu);
