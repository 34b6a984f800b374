// aten::normal_(Tensor(a!) self, float mean=0., float std=1., *, Generator? generator=None): honest,
// CPU float32; each call draws from its own seed (a fixed base plus a call counter).
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <atomic>
#include <random>

at::Tensor& normal_fill(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  if (!self.is_cpu() || self.scalar_type() != at::kFloat || !self.is_contiguous() || generator)
    throw bb::Decline("contiguous CPU float32 without a generator only");
  static std::atomic<uint64_t> calls{0};
  std::mt19937_64 gen(40 + 7919 * ++calls);
  std::normal_distribution<double> draw(mean, std);
  float* x = self.mutable_data_ptr<float>();
  for (int64_t i = 0; i < self.numel(); ++i) x[i] = static_cast<float>(draw(gen));
  return self;
}

BB_KERNEL("aten::normal_", normal_fill);
