#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor broken_relu(const at::Tensor& x) { return x this_is_not_cpp; }

BB_KERNEL("aten::relu", broken_relu);
