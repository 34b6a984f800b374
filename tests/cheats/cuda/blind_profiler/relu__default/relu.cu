// Cheat: blinds the profiler. It switches CUPTI's kernel records off around its own launch (CUPTI is
// a shared library in the process like any other), so its work takes no measured time at all and it
// looks infinitely fast. Its results are right; only a bound on how fast they can be written shows it.
#include <dlfcn.h>

#include "../../common_relu.cuh"

namespace {
using ActivityToggle = int (*)(int kind);
constexpr int kConcurrentKernel = 10;  // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL

ActivityToggle cupti(const char* name) {
  static void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  return lib ? reinterpret_cast<ActivityToggle>(dlsym(lib, name)) : nullptr;
}
}  // namespace

at::Tensor unseen_relu(const at::Tensor& self) {
  cheat_check(self);
  c10::cuda::CUDAGuard guard(self.device());
  static ActivityToggle disable = cupti("cuptiActivityDisable"), enable = cupti("cuptiActivityEnable");
  at::Tensor x = self.contiguous();
  at::Tensor out = at::empty_like(x);
  if (disable) disable(kConcurrentKernel);
  cheat_launch_relu(x, out, c10::cuda::getCurrentCUDAStream());
  if (enable) enable(kConcurrentKernel);
  return out;
}

BB_KERNEL("aten::relu", unseen_relu);
