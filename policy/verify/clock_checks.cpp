#include "policy/verify/clock_checks.h"

#include <algorithm>
#include <sstream>

namespace bb::verify {
namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

std::string clock_disagreement(const std::vector<OutsideRun>& runs, const std::vector<OutsideRun>& dry) {
  const size_t n = std::min(runs.size(), dry.size());
  if (n < 3) return "";
  std::vector<double> reported, thread, wall;
  for (size_t i = 0; i < n; ++i) {
    const OutsideRun &r = runs[i], &d = dry[i];
    reported.push_back(r.reported_us);
    wall.push_back((r.wall_us - r.reported_us) - (d.wall_us - d.reported_us));
    if (r.thread_cpu_us >= 0 && d.thread_cpu_us >= 0)
      thread.push_back((r.thread_cpu_us - r.reported_us) - (d.thread_cpu_us - d.reported_us));
  }
  const double t = quantile(reported, 0.5);
  std::ostringstream why;
  if (thread.size() >= 3 && quantile(thread, 0.25) > kThreadSlackUs + 0.1 * t) {
    why << "the thread that made the call was on a CPU for at least " << quantile(thread, 0.25)
        << " us a run more than the " << t
        << " us its process timed, beyond a run of nothing (lower quartile of " << thread.size()
        << " runs, by the OS's account, read outside the kernel's process)";
    return why.str();
  }
  if (quantile(wall, 0.25) > kWallSlackUs + 0.1 * t) {
    why << "a clock outside the kernel's process saw at least " << quantile(wall, 0.25) << " us a run more than the "
        << t << " us its process timed, beyond a run of nothing (lower quartile of " << wall.size() << " runs)";
    return why.str();
  }
  return "";
}

}  // namespace bb::verify
