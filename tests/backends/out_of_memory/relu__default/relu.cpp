#include <ATen/ATen.h>
#include <bb/kernel.h>

// Raises torch's out-of-memory message on its process's first call, as a kernel does when the judge's
// copies beside it fill the device; computes relu after: bbreplay gives memory back and runs the case once
// more (tests/integration/test_bad_input.py, MemoryLimits).
at::Tensor relu_after_one_oom(const at::Tensor& x) {
  static bool raised = false;
  if (!raised) {
    raised = true;
    throw std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB (a test's stand-in)");
  }
  at::Tensor out = at::empty_like(x);
  auto* o = out.data_ptr<float>();
  const at::Tensor in = x.contiguous();
  const auto* i = in.data_ptr<float>();
  for (int64_t k = 0; k < x.numel(); ++k) o[k] = i[k] > 0 ? i[k] : 0;
  return out;
}

BB_KERNEL("aten::relu", relu_after_one_oom);
