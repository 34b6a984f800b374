#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor my_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b) { return x; }

BB_KERNEL("aten::linear", my_linear);
