// The random ops bbreplay judges by their properties (replay/random/random_judge.h), as data: one table,
// kept here, with each op's distribution and which of its arguments are the distribution's
// parameters. No torch dependency (bbtrace reads it too).
#pragma once

#include <string>
#include <vector>

namespace bb::replay {

enum class Distribution {
  Bernoulli,        // values in {0, 1}: 1 with probability `p`
  BernoulliTensor,  // values in {0, 1}: 1 with each element's probability (a tensor argument)
  Dropout,          // each element kept (scaled by 1/(1-p)) or zeroed; `p` the drop probability
  FusedDropout,     // as Dropout, but `p` is the keep probability (aten::_fused_dropout)
  Normal,           // mean, std
  LogNormal,        // mean, std of its logarithm
  Uniform,          // from, to (continuous)
  Exponential,      // rate lambd
  Geometric,        // p; values 1, 2, ...
  Cauchy,           // median, sigma
  Integers,         // integers uniform in [low, high)
};

// The argument names of a distribution's parameters: `first` and `second` (empty where it has one
// or none), with the values taken when the call has none (the schema's defaults; NAN: required).
struct RandomOp {
  std::string op;  // full overload name: aten::bernoulli_.float
  Distribution distribution;
  std::string first, second;
  double first_default, second_default;
  std::string result_of;      // where the values go: "self" (in place), "result" (a new tensor)
  std::string size;           // factories: the argument holding the result's size ("" when none)
  std::string probabilities;  // BernoulliTensor: the tensor argument holding the probabilities
};

// The table entry of `op` (a full overload name), or null when bbreplay does not judge it by its
// properties.
const RandomOp* random_op(const std::string& op);

const std::vector<RandomOp>& random_ops();

}  // namespace bb::replay
