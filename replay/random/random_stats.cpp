#include "replay/random/random_stats.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

namespace bb::replay::stats {
namespace {

double log_pmf(int64_t n, double p, int64_t k) {
  const double nk = static_cast<double>(n), kk = static_cast<double>(k);
  return std::lgamma(nk + 1) - std::lgamma(kk + 1) - std::lgamma(nk - kk + 1) + kk * std::log(p) +
         (nk - kk) * std::log1p(-p);
}

// The probabilities of k = first .. last, where everything outside has less than 1e-300 of the
// mode's probability each (and, summed, far less than any alpha this is used with).
struct Masses {
  int64_t first = 0;
  std::vector<double> pmf;
};

Masses masses(int64_t n, double p) {
  const int64_t mode = std::clamp<int64_t>(static_cast<int64_t>(std::floor((static_cast<double>(n) + 1) * p)), 0, n);
  const double top = log_pmf(n, p, mode);
  int64_t lo = mode, hi = mode;
  while (lo > 0 && log_pmf(n, p, lo - 1) - top > -700) --lo;
  while (hi < n && log_pmf(n, p, hi + 1) - top > -700) ++hi;
  Masses m{lo, {}};
  for (int64_t k = lo; k <= hi; ++k) m.pmf.push_back(std::exp(log_pmf(n, p, k)));
  return m;
}

}  // namespace

Interval binomial_interval(int64_t n, double p, double alpha) {
  if (n <= 0) return {0, 0};
  if (p <= 0) return {0, 0};
  if (p >= 1) return {n, n};
  const Masses m = masses(n, p);
  const int64_t size = static_cast<int64_t>(m.pmf.size());
  Interval out{m.first, m.first + size - 1};
  double below = 0;  // P(X < m.first + j)
  for (int64_t j = 0; j < size && below + m.pmf[j] <= alpha / 2; ++j) {
    below += m.pmf[j];
    out.lo = m.first + j + 1;
  }
  double above = 0;  // P(X > m.first + j)
  for (int64_t j = size - 1; j >= 0 && above + m.pmf[j] <= alpha / 2; --j) {
    above += m.pmf[j];
    out.hi = m.first + j - 1;
  }
  return out;
}

double binomial_cdf(int64_t n, double p, int64_t k) {
  if (k < 0) return 0;
  if (k >= n || p <= 0) return 1;
  if (p >= 1) return 0;
  const Masses m = masses(n, p);
  double sum = 0;
  for (size_t j = 0; j < m.pmf.size() && m.first + static_cast<int64_t>(j) <= k; ++j) sum += m.pmf[j];
  return std::min(sum, 1.0);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double q) {
  if (q <= 0) return -INFINITY;
  if (q >= 1) return INFINITY;
  // A start from the logistic approximation, then Newton on the CDF (which erfc gives to full precision).
  double x = std::log(q / (1 - q)) * std::sqrt(3.0) / M_PI;
  for (int k = 0; k < 60; ++k) {
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    const double step = (normal_cdf(x) - q) / std::max(pdf, 1e-300);
    x -= std::clamp(step, -1.0, 1.0);
    if (std::fabs(step) < 1e-12) break;
  }
  return x;
}

std::string describe_count(const std::string& what, int64_t count, int64_t n, double p, const Interval& b,
                           double alpha) {
  std::ostringstream s;
  s << what << ": " << count << " of " << n << ", outside [" << b.lo << ", " << b.hi << "] (the counts an honest "
    << "kernel gives but with probability " << alpha << " or less, from Binomial(" << n << ", " << p << "))";
  return s.str();
}

}  // namespace bb::replay::stats
