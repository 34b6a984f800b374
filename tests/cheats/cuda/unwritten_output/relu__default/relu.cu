// Cheat: writes only the first half of its output. The rest holds whatever the caching allocator's
// block held — in a benchmark loop often an earlier, correct result, so a check that compares only
// once, on reused memory, passes it.
#include "../../common_relu.cuh"

at::Tensor half_relu(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  const int64_t half = x.numel() / 2;
  if (half > 0) {
    const int blocks = static_cast<int>(std::min<int64_t>((half + 255) / 256, 65535));
    cheat_relu_kernel<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(x.const_data_ptr<float>(),
                                                                             out.mutable_data_ptr<float>(), half);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return out;
}

BB_KERNEL("aten::relu", half_relu);
