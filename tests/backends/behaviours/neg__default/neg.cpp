#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <stdexcept>

at::Tensor failing_neg(const at::Tensor& x) { throw std::runtime_error("neg kernel failed on purpose"); }

BB_KERNEL("aten::neg", failing_neg);
