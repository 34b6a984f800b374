// The statistics that judge random ops (replay/random/random_stats.h): expectations from the binomial
// distribution itself, summed here independently of the implementation, and from known values; and the
// checks made of them (random_checks.h).
#include <ATen/ATen.h>

#include <cmath>

#include "catch.h"
#include "replay/random/random_checks.h"
#include "replay/random/random_stats.h"

using namespace bb::replay::stats;

namespace {

// P(X <= k), X ~ Binomial(n, p), by the plain sum of C(n, j) p^j (1-p)^(n-j) (small n only).
long double plain_cdf(int n, long double p, int k) {
  long double sum = 0, c = 1;  // C(n, j)
  for (int j = 0; j <= k && j <= n; ++j) {
    sum += c * std::pow(p, j) * std::pow(1 - p, n - j);
    c = c * (n - j) / (j + 1);
  }
  return sum;
}

}  // namespace

TEST_CASE("binomial interval: the textbook case n = 10, p = 1/2, alpha = 5%") {
  // P(X <= 1) = 11/1024 = 1.07% <= 2.5% < P(X <= 2) = 56/1024 = 5.47%: counts 2..8 are accepted.
  const Interval b = binomial_interval(10, 0.5, 0.05);
  CHECK(b.lo == 2);
  CHECK(b.hi == 8);
}

TEST_CASE("binomial interval: each tail at most alpha/2, and no narrower interval would be") {
  for (int n : {1, 7, 30, 100, 400})
    for (double p : {0.01, 0.1, 0.3, 0.5, 0.9})
      for (double alpha : {1e-1, 1e-3, 1e-6}) {
        const Interval b = binomial_interval(n, p, alpha);
        INFO("n " << n << " p " << p << " alpha " << alpha << " [" << b.lo << ", " << b.hi << "]");
        const long double below = b.lo > 0 ? plain_cdf(n, p, static_cast<int>(b.lo) - 1) : 0;
        const long double above = 1 - plain_cdf(n, p, static_cast<int>(b.hi));
        CHECK(below <= alpha / 2 * (1 + 1e-9));
        CHECK(above <= alpha / 2 * (1 + 1e-9));
        if (b.lo < n) CHECK(plain_cdf(n, p, static_cast<int>(b.lo)) > alpha / 2 * (1 - 1e-9));
        if (b.hi > 0) CHECK(1 - plain_cdf(n, p, static_cast<int>(b.hi) - 1) > alpha / 2 * (1 - 1e-9));
      }
}

TEST_CASE("binomial interval: certain outcomes and large samples") {
  CHECK(binomial_interval(100, 0.0, 1e-6).hi == 0);
  CHECK(binomial_interval(100, 1.0, 1e-6).lo == 100);
  // n = 2^18 at p = 0.9 and alpha = 1e-6: the normal approximation puts the bounds at
  // np -+ z sqrt(np(1-p)), z = 4.8916 (the 1 - 5e-7 quantile): 235929.6 -+ 751.6, to within a few
  // counts (the binomial's skew at this n is small).
  const Interval b = binomial_interval(262144, 0.9, 1e-6);
  CHECK(std::fabs(static_cast<double>(b.lo) - (235929.6 - 751.6)) < 20);
  CHECK(std::fabs(static_cast<double>(b.hi) - (235929.6 + 751.6)) < 20);
  // A keep rate 2% off (0.88 instead of 0.9) is far outside.
  CHECK(0.88 * 262144 < b.lo);
}

TEST_CASE("binomial cdf agrees with the plain sum") {
  CHECK(binomial_cdf(10, 0.5, 1) == Approx(11.0 / 1024));
  CHECK(binomial_cdf(10, 0.5, 10) == 1.0);
  CHECK(binomial_cdf(10, 0.5, -1) == 0.0);
  CHECK(binomial_cdf(50, 0.2, 12) == Approx(static_cast<double>(plain_cdf(50, 0.2L, 12))).epsilon(1e-9));
}

TEST_CASE("the standard normal's cdf and quantiles, against tabulated values") {
  CHECK(normal_cdf(0) == Approx(0.5));
  CHECK(normal_cdf(1.959963984540054) == Approx(0.975).epsilon(1e-12));
  CHECK(normal_quantile(0.975) == Approx(1.959963984540054).epsilon(1e-9));
  CHECK(normal_quantile(0.5) == Approx(0.0).margin(1e-12));
  CHECK(normal_quantile(1 - 5e-7) == Approx(4.891638475698).epsilon(1e-8));
  CHECK(normal_quantile(0.001) == Approx(-3.090232306168).epsilon(1e-9));
}

// check_values (replay/random/random_checks.h): honest draws pass in every dtype they come in; values
// off the support or off the distribution's quantiles fail, and say how.
namespace {

using bb::replay::check_values;
using bb::replay::Distribution;
using bb::replay::Model;

std::string judge(const Model& m, const at::Tensor& values) { return check_values(m, values, {}, {}, {}, 1e-4); }

}  // namespace

TEST_CASE("random values: honest draws pass in their own dtype") {
  at::manual_seed(7);
  const int64_t n = 200000;
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    INFO("dtype " << dtype);
    // (drawn in float and rounded: torch's own CPU bfloat16 uniform_ and normal_ are not, below)
    const auto draw = dtype == at::kBFloat16 ? at::kFloat : dtype;
    CHECK(judge({Distribution::Normal, 1, 2}, at::empty({n}, draw).normal_(1, 2).to(dtype)) == "");
    CHECK(judge({Distribution::Uniform, -0.3, 0.7}, at::empty({n}, draw).uniform_(-0.3, 0.7).to(dtype)) == "");
    CHECK(judge({Distribution::Exponential, 2}, at::empty({n}, dtype).exponential_(2)) == "");
    CHECK(judge({Distribution::Geometric, 0.3}, at::empty({n}, dtype).geometric_(0.3)) == "");
    CHECK(judge({Distribution::Bernoulli, 0.25}, at::empty({n}, dtype).bernoulli_(0.25)) == "");
  }
  CHECK(judge({Distribution::Integers, -5, 9}, at::empty({n}, at::kLong).random_(-5, 9)) == "");
  CHECK(judge({Distribution::Integers, 0, 100}, at::empty({n}, at::kInt).random_(0, 100)) == "");
  CHECK(judge({Distribution::Bernoulli, 0.25}, at::empty({n}, at::kBool).bernoulli_(0.25)) == "");
  CHECK(judge({Distribution::Normal, 0, 1}, at::empty({400, 500}, at::kFloat).normal_().t()) == "");  // (strided)
  // torch's CPU bfloat16 kernels fail these checks themselves: uniform_ draws from its bounds rounded to
  // bfloat16 (-0.3 is -0.30078), normal_ from bfloat16-rounded uniforms (thin tails). Where native's
  // values fail a check, the judge does not hold it against the kernel (random_judge.cpp, "not judged").
  CHECK_FALSE(judge({Distribution::Uniform, -0.3, 0.7}, at::empty({n}, at::kBFloat16).uniform_(-0.3, 0.7)).empty());
  CHECK_FALSE(judge({Distribution::Normal, 1, 2}, at::empty({n}, at::kBFloat16).normal_(1, 2)).empty());
}

TEST_CASE("random values: off the support or the quantiles, they fail and say how") {
  at::manual_seed(7);
  const int64_t n = 200000;
  at::Tensor x = at::empty({n}, at::kFloat).normal_(0, 1);
  const std::string wide = judge({Distribution::Normal, 0, 1}, x * 1.1);
  CHECK(wide.find("values below") == 0);
  CHECK(wide.find("quantile") != std::string::npos);
  CHECK(judge({Distribution::Normal, 0, 1}, x + 0.05).find("quantile") != std::string::npos);
  x[17] = NAN;
  CHECK(judge({Distribution::Normal, 0, 1}, x) == "NaN among the values");
  at::Tensor u = at::empty({n}, at::kBFloat16).uniform_(0, 1);
  u[3] = 1.5;
  CHECK(judge({Distribution::Uniform, 0, 1}, u) == "values outside [0, 1]");
  CHECK(judge({Distribution::Exponential, 1}, -at::empty({n}, at::kFloat).exponential_(1)) == "negative values");
  CHECK(judge({Distribution::Geometric, 0.3}, at::empty({n}, at::kFloat).geometric_(0.3) + 0.5) ==
        "values that are not integers 1, 2, ...");
  CHECK(judge({Distribution::Integers, 0, 10}, at::empty({n}, at::kLong).random_(0, 11)) ==
        "values that are not integers in [0, 10)");
  CHECK(judge({Distribution::Integers, 0, 10}, at::empty({n}, at::kFloat).uniform_(0, 9.9)) ==
        "values that are not integers in [0, 10)");
  at::Tensor b = at::empty({n}, at::kFloat).bernoulli_(0.25);
  CHECK(judge({Distribution::Bernoulli, 0.5}, b).find("ones") == 0);
  b[5] = 0.5;
  CHECK(judge({Distribution::Bernoulli, 0.25}, b) == "values other than 0 and 1");
  CHECK(judge({Distribution::Integers, 0, 10}, at::empty({0}, at::kLong)) == "");
}
