#include <ATen/ATen.h>

// Forgot BB_KERNEL.
at::Tensor unregistered_neg(const at::Tensor& x) { return -x; }
