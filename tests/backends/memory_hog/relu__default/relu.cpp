#include <ATen/ATen.h>
#include <bb/kernel.h>

// Takes 2 GiB of scratch memory and writes all of it on every call: beyond bbreplay's --worker-memory,
// the allocation fails and so does the case (tests/integration/test_bad_input.py, MemoryLimits).
at::Tensor greedy_relu(const at::Tensor& x) {
  at::Tensor scratch = at::empty({int64_t{2} << 30}, x.options().dtype(at::kByte));
  scratch.fill_(1);
  at::Tensor out = at::empty_like(x);
  auto* o = out.data_ptr<float>();
  const auto* in = x.contiguous().data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0 ? in[i] : 0;
  return out;
}

BB_KERNEL("aten::relu", greedy_relu);
