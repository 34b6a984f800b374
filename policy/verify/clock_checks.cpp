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
  std::vector<double> reported, thread, dry_thread, wall;
  for (size_t i = 0; i < runs.size(); ++i) {
    const OutsideRun& r = runs[i];
    reported.push_back(r.reported_us);
    if (r.thread_us >= 0) thread.push_back(r.thread_us - r.reported_us);
    if (i < dry.size())  // (the wall: each run less the run of nothing made beside it)
      wall.push_back((r.wall_us - r.reported_us) - (dry[i].wall_us - dry[i].reported_us));
  }
  for (const OutsideRun& d : dry)
    if (d.thread_us >= 0) dry_thread.push_back(d.thread_us - d.reported_us);
  const double t = quantile(reported, 0.5);
  std::ostringstream why;
  if (thread.size() >= 3 && dry_thread.size() >= 3) {
    // (the thread: each side by its own lower quartile)
    if (const double seen = quantile(thread, 0.25) - quantile(dry_thread, 0.25); seen > kThreadSlackUs + 0.1 * t) {
      why << "the thread that made the call was on a CPU or waiting for one for at least " << seen
          << " us a run more than the " << t << " us its process timed, beyond a run of nothing (lower quartiles of "
          << thread.size() << " runs and " << dry_thread.size()
          << " runs of nothing, by the OS's account, read outside the kernel's process)";
      return why.str();
    }
  }
  if (const double seen = quantile(wall, 0.25); seen > kWallSlackUs + 0.1 * t) {
    why << "a clock outside the kernel's process saw at least " << seen << " us a run more than the " << t
        << " us its process timed, beyond a run of nothing (lower quartile of " << wall.size() << " runs)";
    return why.str();
  }
  return "";
}

}  // namespace bb::verify
