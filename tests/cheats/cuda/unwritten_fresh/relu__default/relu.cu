// Cheat: writes only the first half of its output, and takes that output from memory the caching
// allocator gets fresh from the driver (its cache emptied first): freed pages come back holding what they
// held, often an earlier correct result. Poisoning that filled only the cache's free blocks before the
// call never touched this memory; filling each allocation as it is handed out does.
#include <c10/cuda/CUDACachingAllocator.h>

#include "../../common_relu.cuh"

at::Tensor half_relu_fresh(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  c10::cuda::CUDACachingAllocator::emptyCache();
  at::Tensor out = at::empty_like(x);
  cheat_launch_relu(x, out, c10::cuda::getCurrentCUDAStream(), x.numel() / 2);
  return out;
}

BB_KERNEL("aten::relu", half_relu_fresh);
