#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor crashing_tanh(const at::Tensor& x) {
  if (x.numel() == 13) {
    volatile float* nowhere = nullptr;
    *nowhere = 1.0f;
  }
  return at::full(x.sizes(), 42.0, x.options());
}

BB_KERNEL("aten::tanh", crashing_tanh);
