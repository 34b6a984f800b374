// The statistics that judge random ops (replay/random/random_judge.h): exact binomial acceptance intervals
// and the distributions' CDFs and quantiles. No torch dependency.
#pragma once

#include <cstdint>
#include <string>

namespace bb::replay::stats {

// The false-alarm rate of one random case: the chance that an honest kernel fails it, at most,
// shared out evenly (Bonferroni) among the case's statistical checks.
inline constexpr double kFalseAlarm = 1e-6;

// The number of elements a random case is judged on at least (its input is enlarged to it where the
// traced one is smaller; replay/random/random_judge.cpp).
inline constexpr int64_t kDecidable = int64_t{1} << 18;

// Counts that a Binomial(n, p) variable falls outside with probability at most alpha: [lo, hi] with
// P(X < lo) <= alpha/2 and P(X > hi) <= alpha/2, each the narrowest such bound (exact, from the
// binomial probabilities, not from a normal approximation).
struct Interval {
  int64_t lo = 0, hi = 0;
};
Interval binomial_interval(int64_t n, double p, double alpha);

// P(X <= k) for X ~ Binomial(n, p), summed exactly (terms below 1e-300 of the largest left out).
double binomial_cdf(int64_t n, double p, int64_t k);

// The standard normal's CDF and its inverse (|error| < 1e-9 on the inverse, refined by Newton steps).
double normal_cdf(double x);
double normal_quantile(double q);

// "kept: 1234 of 262144, outside [1200, 1300] (...)": a failed check's message.
std::string describe_count(const std::string& what, int64_t count, int64_t n, double p, const Interval& bound,
                           double alpha);

}  // namespace bb::replay::stats
