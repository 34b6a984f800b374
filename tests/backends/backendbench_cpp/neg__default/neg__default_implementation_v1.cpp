// BackendBench's C++ form (its load_inline loader): the first <folder>_implementation* file in sorted
// order is a .cpp (a .cu twin, if there were one, would be its CUDA source), built by torch's
// load_inline, which binds the function named as the folder. A CPU float32 kernel.
#include <torch/extension.h>

torch::Tensor neg__default(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensors only");
  torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  const float* p = in.data_ptr<float>();
  float* q = out.data_ptr<float>();
  for (int64_t i = 0; i < in.numel(); ++i) q[i] = -p[i];
  return out;
}
