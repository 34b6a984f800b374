// Not a cheat: an alarm. An honest relu that raises if it is ever given input values it was given
// before — the only time a cache keyed on values (or shapes, or addresses) can pay off. bbreplay must
// never show a kernel the same inputs twice (tests/integration/test_integrity.py).
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

at::Tensor relu_alarm(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  std::string key(reinterpret_cast<const char*>(c.const_data_ptr<float>()), c.numel() * sizeof(float));
  for (int64_t d : x.sizes()) key += "," + std::to_string(d);
  static std::mutex mu;
  static std::set<std::string> seen;
  // (an empty input holds no values: there is nothing a cache could have kept from it)
  if (c.numel() > 0) {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) throw std::runtime_error("given input values it was given before");
  }
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

BB_KERNEL("aten::relu", relu_alarm);
