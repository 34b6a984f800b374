// Honest: computes the second half of its relu on a worker thread of its own, which it joins before
// returning (a std::thread per call). Nothing outlives the call: it must pass, unflagged, and be timed.
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <thread>

namespace {

void relu_range(const float* in, float* out, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; ++i) out[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
}

}  // namespace

at::Tensor relu_on_two_threads(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  const int64_t n = c.numel(), half = n / 2;
  std::thread helper(relu_range, in, o, half, n);
  relu_range(in, o, 0, half);
  helper.join();
  return out;
}

BB_KERNEL("aten::relu", relu_on_two_threads);
