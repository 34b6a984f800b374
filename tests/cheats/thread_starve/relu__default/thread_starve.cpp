// Cheat: global torch state. On its first call it sets at::set_num_threads(1), so
// every native ATen kernel in the process runs single-threaded from then on; the kernel itself splits
// its work over two std::threads of its own (joined before it returns: no escaping work).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <bb/kernel.h>
#include <thread>

at::Tensor starve_relu(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat) throw bb::Decline("float32 only");
  static bool once = [] { at::set_num_threads(1); return true; }();
  (void)once;
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  const int64_t n = c.numel();
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = (in[i] > 0 || in[i] != in[i]) ? in[i] : 0.0f;
  };
  if (n < 65536) { body(0, n); return out; }
  std::thread t(body, n / 2, n);
  body(0, n / 2);
  t.join();
  return out;
}

BB_KERNEL("aten::relu", starve_relu);
