#include <ATen/ATen.h>
#include <bb/kernel.h>

// Cheats by calling the op it claims to implement.
at::Tensor reentrant_sigmoid(const at::Tensor& x) { return at::sigmoid(x); }

BB_KERNEL("aten::sigmoid", reentrant_sigmoid);
