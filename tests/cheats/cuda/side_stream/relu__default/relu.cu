// Cheat: does the work on a side stream the caller never waits for, and leaves it busy after
// returning (timing the caller's stream alone would miss it; results read after a device-wide sync
// are right).
#include "../../common_relu.cuh"

at::Tensor relu_on_side_stream(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  static cudaStream_t side = [] {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream());  // inputs are ready
  cheat_launch_relu(x, out, side);
  cheat_spin_kernel<<<1, 1, 0, side>>>(2000000);  // ~1 ms at 2 GHz
  return out;
}

BB_KERNEL("aten::relu", relu_on_side_stream);
