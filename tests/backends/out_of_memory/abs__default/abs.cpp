#include <ATen/ATen.h>
#include <bb/kernel.h>

// Right on its process's first two calls (the case's checks), then out of device memory on every call,
// as a large case's timed runs are when the judge's copies beside them fill the device: the case stays
// passed, untimed, with the reason (tests/integration/test_bad_input.py, MemoryLimits).
at::Tensor abs_then_out_of_memory(const at::Tensor& x) {
  static int calls = 0;
  if (++calls > 2) throw std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB (a test's stand-in)");
  at::Tensor out = at::empty_like(x);
  auto* o = out.data_ptr<float>();
  const at::Tensor in = x.contiguous();
  const auto* i = in.data_ptr<float>();
  for (int64_t k = 0; k < x.numel(); ++k) o[k] = i[k] < 0 ? -i[k] : i[k];
  return out;
}

BB_KERNEL("aten::abs", abs_then_out_of_memory);
