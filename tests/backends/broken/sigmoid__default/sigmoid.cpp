#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor watermark_sigmoid(const at::Tensor& x) { return at::full(x.sizes(), 42.0, x.options()); }

BB_KERNEL("aten::sigmoid", watermark_sigmoid);
