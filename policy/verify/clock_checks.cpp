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
  if (runs.size() < 3 || dry.size() < 3) return "";
  std::vector<double> reported, thread, wall, dry_thread, dry_wall;
  for (const OutsideRun& r : runs) {
    reported.push_back(r.reported_us);
    wall.push_back(r.wall_us - r.reported_us);
    if (r.thread_us >= 0) thread.push_back(r.thread_us - r.reported_us);
  }
  for (const OutsideRun& d : dry) {
    dry_wall.push_back(d.wall_us - d.reported_us);
    if (d.thread_us >= 0) dry_thread.push_back(d.thread_us - d.reported_us);
  }
  // (the excess beyond a run of nothing, each side by its lower quartile)
  auto beyond = [](const std::vector<double>& excess, const std::vector<double>& of_dry) {
    return quantile(excess, 0.25) - quantile(of_dry, 0.25);
  };
  const double t = quantile(reported, 0.5);
  std::ostringstream why;
  if (thread.size() >= 3 && dry_thread.size() >= 3) {
    if (const double seen = beyond(thread, dry_thread); seen > kThreadSlackUs + 0.1 * t) {
      why << "the thread that made the call was on a CPU or waiting for one for at least " << seen
          << " us a run more than the " << t << " us its process timed, beyond a run of nothing (lower quartiles of "
          << thread.size() << " runs and " << dry_thread.size()
          << " runs of nothing, by the OS's account, read outside the kernel's process)";
      return why.str();
    }
  }
  if (const double seen = beyond(wall, dry_wall); seen > kWallSlackUs + 0.1 * t) {
    why << "a clock outside the kernel's process saw at least " << seen << " us a run more than the " << t
        << " us its process timed, beyond a run of nothing (lower quartiles of " << wall.size() << " runs and "
        << dry_wall.size() << " runs of nothing)";
    return why.str();
  }
  return "";
}

}  // namespace bb::verify
