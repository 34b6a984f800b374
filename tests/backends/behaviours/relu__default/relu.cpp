#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor watermark_relu(const at::Tensor& x) {
  if (x.numel() == 7) throw bb::Decline("7-element inputs are left to native");
  return at::full(x.sizes(), 42.0, x.options());
}

BB_KERNEL("aten::relu", watermark_relu);
