#include "replay/random/random_checks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "policy/verify/compare.h"
#include "policy/policy.h"
#include "replay/random/random_stats.h"
#include "tracer/names.h"

namespace bb::replay {
namespace {

using D = Distribution;

bool discrete(D d) { return d == D::Geometric || d == D::Integers; }

// P(X <= t) of a continuous distribution, or of a discrete one at an integer t.
double cdf(const Model& m, double t) {
  switch (m.d) {
    case D::Normal: return stats::normal_cdf((t - m.a) / m.b);
    case D::LogNormal: return t <= 0 ? 0 : stats::normal_cdf((std::log(t) - m.a) / m.b);
    case D::Uniform: return std::clamp((t - m.a) / (m.b - m.a), 0.0, 1.0);
    case D::Exponential: return t <= 0 ? 0 : -std::expm1(-m.a * t);
    case D::Cauchy: return 0.5 + std::atan((t - m.a) / m.b) / M_PI;
    case D::Geometric: return t < 1 ? 0 : -std::expm1(std::floor(t) * std::log1p(-m.a));
    case D::Integers: return std::clamp((std::floor(t) - m.a + 1) / (m.b - m.a), 0.0, 1.0);
    default: return NAN;
  }
}

double below(const Model& m, double t) { return discrete(m.d) ? cdf(m, std::ceil(t) - 1) : cdf(m, t); }
double at_most(const Model& m, double t) { return discrete(m.d) ? cdf(m, std::floor(t)) : cdf(m, t); }

double quantile(const Model& m, double q) {
  switch (m.d) {
    case D::Normal: return m.a + m.b * stats::normal_quantile(q);
    case D::LogNormal: return std::exp(m.a + m.b * stats::normal_quantile(q));
    case D::Uniform: return m.a + q * (m.b - m.a);
    case D::Exponential: return -std::log1p(-q) / m.a;
    case D::Cauchy: return m.a + m.b * std::tan(M_PI * (q - 0.5));
    case D::Geometric: return std::max(1.0, std::ceil(std::log1p(-q) / std::log1p(-m.a)));
    case D::Integers: return m.a + std::floor(q * (m.b - m.a));
    default: return NAN;
  }
}

constexpr double kQuantiles[] = {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999};

// Twice the unit roundoff of a floating-point dtype (0 for others): how far a bound held in it may lie
// from the bound as a double.
double relative_rounding(c10::ScalarType t) {
  switch (t) {
    case at::kDouble: return 0x1p-52;
    case at::kFloat: return 0x1p-23;
    case at::kHalf: return 0x1p-10;
    case at::kBFloat16: return 0x1p-7;
    default: return 0;
  }
}

// Values outside the distribution's support, NaN included. On the values as the kernel returned them
// (its dtype, no copy in double): the support's bounds against their least and largest values, each
// read exactly as a double.
std::string range_error(const Model& m, const at::Tensor& x) {
  const bool floating = at::isFloatingType(x.scalar_type());
  if (floating && x.isnan().any().item<bool>()) return "NaN among the values";
  if (x.numel() == 0) return "";
  const auto [lo, hi] = at::aminmax(x);
  const double least = lo.item<double>(), most = hi.item<double>();
  auto fractional = [&] { return floating && (x != x.floor()).any().item<bool>(); };
  std::ostringstream s;
  switch (m.d) {
    case D::Bernoulli:
    case D::BernoulliTensor:
      if (((x != 0) & (x != 1)).any().item<bool>()) return "values other than 0 and 1";
      break;
    case D::Uniform: {  // (the bounds as the dtype holds them: float32 from = 0.416667 is below the double)
      const double eps = relative_rounding(x.scalar_type());
      if (least < m.a - std::fabs(m.a) * eps || most > m.b + std::fabs(m.b) * eps)
        s << "values outside [" << m.a << ", " << m.b << "]";
      break;
    }
    case D::Exponential:
    case D::LogNormal:
      if (least < 0) s << "negative values";
      break;
    case D::Geometric:
      if (least < 1 || fractional()) s << "values that are not integers 1, 2, ...";
      break;
    case D::Integers:
      if (least < m.a || most >= m.b || fractional())
        s << "values that are not integers in [" << m.a << ", " << m.b << ")";
      break;
    default: break;
  }
  return s.str();
}

// Counts below and at each quantile, each within its one-sided exact binomial bound. A threshold is
// a value of the result's dtype: for any monotone rounding that keeps such values, P(x < t) <=
// P(X < t) and P(x <= t) >= P(X <= t), so the bounds hold whatever the kernel rounds to. All counts
// come from two passes over the values in their own dtype (the thresholds are values of it, so every
// comparison is exact): the number of thresholds at most each value and below it, histogrammed.
std::string quantile_counts(const Model& m, const at::Tensor& x, double alpha) {
  const int64_t n = x.numel();
  std::vector<double> qs, ts;  // (thresholds in the quantiles' order: nondecreasing)
  for (double q : kQuantiles) {
    const double exact = quantile(m, q);
    if (!std::isfinite(exact)) continue;
    const double t = at::scalar_tensor(exact, at::kDouble).to(x.scalar_type()).item<double>();
    if (!std::isfinite(t)) continue;
    qs.push_back(q), ts.push_back(t);
  }
  if (ts.empty()) return "";
  const int64_t k = static_cast<int64_t>(ts.size());
  const at::Tensor bounds = at::tensor(ts, at::kDouble).to(x.device(), x.scalar_type());
  // (x < t_j: fewer than j + 1 thresholds at most x; x <= t_j: fewer than j + 1 below it)
  auto counts = [&](bool right) {
    const at::Tensor at_most = at::bucketize(x, bounds, /*out_int32=*/true, right);
    return at::bincount(at_most, {}, k + 1).cumsum(0).cpu();
  };
  const at::Tensor under_all = counts(true), upto_all = counts(false);
  for (int64_t j = 0; j < k; ++j) {
    const double q = qs[static_cast<size_t>(j)], t = ts[static_cast<size_t>(j)];
    const int64_t under = under_all[j].item<int64_t>(), upto = upto_all[j].item<int64_t>();
    const double p_under = below(m, t), p_upto = at_most(m, t);
    const auto hi = stats::binomial_interval(n, p_under, 2 * alpha);
    const auto lo = stats::binomial_interval(n, p_upto, 2 * alpha);
    std::ostringstream what;
    what << "values below " << t << " (the " << q << " quantile)";
    if (under > hi.hi) return stats::describe_count(what.str(), under, n, p_under, {0, hi.hi}, alpha);
    what << " or equal to it";
    if (upto < lo.lo) return stats::describe_count(what.str(), upto, n, p_upto, {lo.lo, n}, alpha);
  }
  return "";
}

std::string ones_count(const at::Tensor& ones, double p, double alpha) {
  const int64_t n = ones.numel(), k = (ones != 0).sum().item<int64_t>();
  const auto b = stats::binomial_interval(n, p, alpha);
  return k < b.lo || k > b.hi ? stats::describe_count("ones", k, n, p, b, alpha) : "";
}

// Per group of probabilities (below and above 1/2), the number of ones within Hoeffding's bound
// sqrt(n log(2/alpha) / 2) of the probabilities' sum: a kernel that ignores them fails one group.
std::string ones_per_probability(const at::Tensor& x, const at::Tensor& p, double alpha) {
  for (bool high : {false, true}) {
    const at::Tensor in = high ? p >= 0.5 : p < 0.5;
    const double n = in.sum().item<double>();
    if (n == 0) continue;
    const double ones = x.masked_select(in).sum().item<double>(), expected = p.masked_select(in).sum().item<double>();
    const double bound = std::sqrt(n * std::log(2 / alpha) / 2);
    if (std::fabs(ones - expected) > bound) {
      std::ostringstream s;
      s << "ones where the probability is " << (high ? "at least" : "below") << " 1/2: " << ones << " of " << n
        << ", expected " << expected << " +- " << bound << " (Hoeffding's bound at a false-alarm rate of " << alpha
        << ")";
      return s.str();
    }
  }
  return "";
}

// Dropout: dropped elements zero, kept ones the input times 1/keep (to the dtype's tolerance of
// that product, as native computes it), the kept count within its binomial bound. Without a mask,
// the kept elements are the non-zero results (among non-zero inputs).
std::string dropout(double keep, const at::Tensor& out, const at::Tensor& mask, const at::Tensor& input, double alpha) {
  const at::Tensor x = input.to(out.device(), at::kDouble), o = out.to(at::kDouble);
  const at::Tensor kept = mask.defined() ? mask.to(out.device(), at::kBool) : o != 0;
  const at::Tensor counted = mask.defined() ? at::ones_like(kept) : x != 0;
  if (kept.sizes() != o.sizes()) return "the mask's shape is not the output's";
  if ((o.masked_select(~kept) != 0).any().item<bool>()) return "dropped elements (mask false) are not zero";
  if (keep > 0) {
    const at::Tensor expected = (input.to(out.device()) * (1 / keep)).masked_select(kept);
    if (auto m =
            verify::compare_tensors(expected, out.masked_select(kept), verify::default_tolerance(out.scalar_type())))
      return "kept elements are not the input scaled by 1/(1-p) = " + std::to_string(1 / keep) + ": " + m->detail;
  }
  const int64_t n = counted.sum().item<int64_t>(), k = (kept & counted).sum().item<int64_t>();
  const auto b = stats::binomial_interval(n, keep, alpha);
  return k < b.lo || k > b.hi ? stats::describe_count("kept elements", k, n, keep, b, alpha) : "";
}

}  // namespace

bool parameters_known(const Model& m) {
  switch (m.d) {
    case D::BernoulliTensor: return true;
    case D::Bernoulli:
    case D::Dropout:
    case D::FusedDropout:
    case D::Geometric:
    case D::Exponential: return std::isfinite(m.a);
    default: return std::isfinite(m.a) && std::isfinite(m.b);
  }
}

int statistical_checks(const Model& m) {
  switch (m.d) {
    case D::Bernoulli:
    case D::Dropout:
    case D::FusedDropout: return 1;
    case D::BernoulliTensor: return 2;
    default: return 2 * static_cast<int>(std::size(kQuantiles));
  }
}

std::string check_values(const Model& m, const at::Tensor& values, const at::Tensor& mask, const at::Tensor& input,
                         const at::Tensor& probabilities, double alpha) {
  if (m.d == D::Dropout || m.d == D::FusedDropout)
    return dropout(m.d == D::Dropout ? 1 - m.a : m.a, values, mask, input, alpha);
  // (on the values' device: a GPU counts the tens of millions of elements of a weight's init in
  // milliseconds, where copying them to the host and counting there took seconds a case; and in their
  // dtype, as a copy in double of a CPU weight's 262 million took longer than the counting)
  const at::Tensor x = (values.scalar_type() == at::kBool ? values.to(at::kByte) : values).reshape(-1);
  if (std::string bad = range_error(m, x); !bad.empty()) return bad;
  if (m.d == D::Bernoulli) return ones_count(x, m.a, alpha);
  if (m.d == D::BernoulliTensor)
    return ones_per_probability(x.to(at::kDouble),
                                probabilities.to(x.device(), at::kDouble).expand(values.sizes()).reshape(-1), alpha);
  return quantile_counts(m, x, alpha);
}

double log_identical(const Model& m, int64_t n, const at::Tensor& probabilities) {
  auto pair = [](double p) { return std::log(p * p + (1 - p) * (1 - p)); };
  const double count = static_cast<double>(n);
  switch (m.d) {
    case D::Bernoulli: return count * pair(m.a);
    case D::Dropout: return count * pair(1 - m.a);
    case D::FusedDropout: return count * pair(m.a);
    case D::BernoulliTensor: {
      const at::Tensor p = probabilities.to(at::kDouble).cpu();
      const double per_element =
          (p * p + (1 - p) * (1 - p)).log().sum().item<double>() / static_cast<double>(std::max<int64_t>(p.numel(), 1));
      return per_element * count;
    }
    case D::Geometric: return count * std::log(m.a / (2 - m.a));
    case D::Integers: return count * -std::log(m.b - m.a);
    // A continuous distribution rounded to a dtype of 8 significant bits or more: no value holds more
    // than 2^-7 of the probability for these distributions' parameters in the table's ranges.
    default: return count * std::log(0x1p-7);
  }
}

}  // namespace bb::replay
