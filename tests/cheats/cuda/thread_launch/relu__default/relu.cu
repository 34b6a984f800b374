// Cheat: launches its work from another host thread (joined before returning, so results are right;
// a harness watching only the calling thread sees no launch at all).
#include <thread>

#include "../../common_relu.cuh"

at::Tensor relu_from_thread(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int device = self.device().index();
  std::thread t([&] {
    cudaSetDevice(device);
    cheat_launch_relu(x, out, stream);
  });
  t.join();
  return out;
}

BB_KERNEL("aten::relu", relu_from_thread);
