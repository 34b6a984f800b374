// Cheat: "no allocator cost": results are written into a ring of three persistent device buffers per
// shape and returned as new tensor objects over them; a result is overwritten three calls later while
// its caller may still hold it. The checks' second call is only one call later, so only the timed
// loop, which holds each side's latest results, sees it.
#include "../../common_relu.cuh"

#include <map>
#include <vector>

at::Tensor relu_into_ring(const at::Tensor& self) {
  struct Ring {
    std::vector<at::Tensor> slots;
    size_t next = 0;
  };
  static std::map<std::vector<int64_t>, Ring> rings;
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  Ring& ring = rings[self.sizes().vec()];
  if (ring.slots.empty())
    for (int k = 0; k < 3; ++k) ring.slots.push_back(at::empty(self.sizes(), self.options()));
  const at::Tensor& slot = ring.slots[ring.next++ % ring.slots.size()];
  at::Tensor out = slot.as_strided(slot.sizes(), slot.strides());
  cheat_launch_relu(self.contiguous(), out, c10::cuda::getCurrentCUDAStream());
  return out;
}

BB_KERNEL("aten::relu", relu_into_ring);
