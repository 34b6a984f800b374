// aten::bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None): honest, CPU
// float32; each call draws from its own seed (a fixed base plus a call counter).
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <atomic>
#include <random>

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  if (!self.is_cpu() || self.scalar_type() != at::kFloat || !self.is_contiguous() || generator)
    throw bb::Decline("contiguous CPU float32 without a generator only");
  static std::atomic<uint64_t> calls{0};
  std::mt19937_64 gen(30 + 7919 * ++calls);
  std::bernoulli_distribution one(p);
  float* x = self.mutable_data_ptr<float>();
  for (int64_t i = 0; i < self.numel(); ++i) x[i] = one(gen) ? 1.0f : 0.0f;
  return self;
}

BB_KERNEL("aten::bernoulli_.float", bernoulli_float);
