#include "replay/judgeable/random_ops.h"

#include <cmath>

namespace bb::replay {

const std::vector<RandomOp>& random_ops() {
  using D = Distribution;
  static const std::vector<RandomOp> table = {
      {"aten::bernoulli_.float", D::Bernoulli, "p", "", 0.5, NAN, "self", "", ""},
      {"aten::bernoulli.p", D::Bernoulli, "p", "", NAN, NAN, "result", "", ""},
      {"aten::bernoulli", D::BernoulliTensor, "", "", NAN, NAN, "result", "", "self"},
      {"aten::bernoulli_.Tensor", D::BernoulliTensor, "", "", NAN, NAN, "self", "", "p"},
      {"aten::native_dropout", D::Dropout, "p", "", NAN, NAN, "result", "", ""},
      {"aten::dropout", D::Dropout, "p", "", NAN, NAN, "result", "", ""},
      {"aten::_fused_dropout", D::FusedDropout, "p", "", NAN, NAN, "result", "", ""},
      {"aten::normal_", D::Normal, "mean", "std", 0.0, 1.0, "self", "", ""},
      {"aten::normal.float_float", D::Normal, "mean", "std", NAN, NAN, "result", "size", ""},
      {"aten::randn", D::Normal, "", "", 0.0, 1.0, "result", "size", ""},
      {"aten::randn_like", D::Normal, "", "", 0.0, 1.0, "result", "", ""},
      {"aten::log_normal_", D::LogNormal, "mean", "std", 1.0, 2.0, "self", "", ""},
      {"aten::uniform_", D::Uniform, "from", "to", 0.0, 1.0, "self", "", ""},
      {"aten::rand", D::Uniform, "", "", 0.0, 1.0, "result", "size", ""},
      {"aten::rand_like", D::Uniform, "", "", 0.0, 1.0, "result", "", ""},
      {"aten::exponential_", D::Exponential, "lambd", "", 1.0, NAN, "self", "", ""},
      {"aten::geometric_", D::Geometric, "p", "", NAN, NAN, "self", "", ""},
      {"aten::cauchy_", D::Cauchy, "median", "sigma", 0.0, 1.0, "self", "", ""},
      {"aten::random_.from", D::Integers, "from", "to", NAN, NAN, "self", "", ""},
      {"aten::random_.to", D::Integers, "", "to", 0.0, NAN, "self", "", ""},
      {"aten::randint.low", D::Integers, "low", "high", NAN, NAN, "result", "size", ""},
      {"aten::randint", D::Integers, "", "high", 0.0, NAN, "result", "size", ""},
      {"aten::randint_like", D::Integers, "", "high", 0.0, NAN, "result", "", ""},
      {"aten::randint_like.low_dtype", D::Integers, "low", "high", NAN, NAN, "result", "", ""},
  };
  return table;
}

const RandomOp* random_op(const std::string& op) {
  for (const auto& r : random_ops())
    if (r.op == op) return &r;
  return nullptr;
}

}  // namespace bb::replay
