#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <chrono>
#include <cmath>
#include <thread>

// Hangs on 17-element inputs (for bbreplay's per-case timeout); otherwise a plain sin.
at::Tensor hanging_sin(const at::Tensor& x) {
  while (x.numel() == 17) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (x.scalar_type() != at::kFloat) throw bb::Decline("float32 only");
  at::Tensor y = at::empty(x.sizes(), x.options());
  at::Tensor c = x.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) y.mutable_data_ptr<float>()[i] = std::sin(c.const_data_ptr<float>()[i]);
  return y;
}

BB_KERNEL("aten::sin", hanging_sin);
