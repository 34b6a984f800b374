// The property checks of replay/random/random_judge.h, one per kind of distribution (replay/judgeable/random_ops.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "replay/judgeable/random_ops.h"

namespace bb::replay {

// One call's distribution: its kind and its two parameters (as in random_ops.h; unused ones NAN).
struct Model {
  Distribution d;
  double a = NAN, b = NAN;
};

// Whether the call's parameters are numbers (random_.from's `to` may be None: the dtype's range).
bool parameters_known(const Model& m);

// How many statistical checks judge one result of `m` (the false-alarm rate is shared among them).
int statistical_checks(const Model& m);

// Why `values` (the op's result) does not look drawn from `m`: range first, then counts; "" when
// it does. `alpha`: the false-alarm rate of each statistical check. `probabilities`: BernoulliTensor's
// per-element probabilities (broadcast to `values`); `input`: Dropout's input. Undefined otherwise.
std::string check_values(const Model& m, const at::Tensor& values, const at::Tensor& mask, const at::Tensor& input,
                         const at::Tensor& probabilities, double alpha);

// The natural log of the probability that two honest calls give identical results on `n` elements
// (an upper bound; 0 where it cannot be bounded).
double log_identical(const Model& m, int64_t n, const at::Tensor& probabilities);

}  // namespace bb::replay
