// A CPU float32 native_dropout with knobs, for the backends in this folder (README.md): each call
// draws its mask from its own seed (a fixed base plus a call counter), so that runs are repeatable
// and calls differ.
#pragma once

#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <random>
#include <tuple>

struct DropoutKnobs {
  double keep_error = 0;         // added to the keep probability 1 - p
  double scale_factor = 1;       // multiplies the scale 1 / (1 - p)
  bool same_mask = false;        // every call draws the same mask
  std::optional<double> p_used;  // the drop probability used whatever p is
};

inline std::tuple<at::Tensor, at::Tensor> dropout_with(const at::Tensor& input, double p, std::optional<bool> train,
                                                       const DropoutKnobs& knobs) {
  if (!input.is_cpu() || input.scalar_type() != at::kFloat || !input.is_contiguous() || (train && !*train))
    throw bb::Decline("contiguous CPU float32 in training only");
  static std::atomic<uint64_t> calls{0};
  std::mt19937_64 gen(knobs.same_mask ? 20 : 20 + 7919 * ++calls);
  const double drop = knobs.p_used ? *knobs.p_used : p;
  std::bernoulli_distribution keep(std::clamp(1 - drop + knobs.keep_error, 0.0, 1.0));
  const float scale = drop < 1 ? static_cast<float>(knobs.scale_factor / (1 - drop)) : 0.0f;
  at::Tensor out = at::empty_like(input), mask = at::empty_like(input, at::kBool);
  const float* x = input.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  bool* m = mask.mutable_data_ptr<bool>();
  for (int64_t i = 0; i < input.numel(); ++i) {
    m[i] = keep(gen);
    o[i] = m[i] ? x[i] * scale : 0.0f;
  }
  return {out, mask};
}
