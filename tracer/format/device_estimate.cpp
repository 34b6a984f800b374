#include "tracer/format/device_estimate.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace bb::trace {

uint64_t extrapolate(const DeviceTime& d, uint64_t count) {
  if (d.calls == 0 || count <= d.calls) return d.total_ns;
  return d.total_ns + (count - d.calls) * d.median_ns;
}

uint64_t estimated_ns(const TraceEntry& e) {
  if (!e.device_time) return 0;
  return e.device_time->estimated_total_ns ? e.device_time->estimated_total_ns : e.device_time->total_ns;
}

std::string similar_key(TraceEntry e) {
  for (auto& a : e.args) {
    if (a.kind == ArgKind::Float || a.kind == ArgKind::Complex) {
      a.f = 0;
      a.c = 0;
    } else if (a.kind == ArgKind::FloatList) {
      std::fill(a.floats.begin(), a.floats.end(), 0.0);  // their number stays: the list's length matters
    }
  }
  return signature_key(e);
}

namespace {

// The per-call medians of timed entries, weighted by their timed calls.
uint64_t weighted_median(std::vector<std::pair<uint64_t, uint64_t>> medians) {
  std::sort(medians.begin(), medians.end());
  uint64_t all = 0, seen = 0;
  for (const auto& m : medians) all += m.second;
  for (const auto& [median, calls] : medians) {
    seen += calls;
    if (2 * seen >= all) return median;
  }
  return medians.empty() ? 0 : medians.back().first;
}

}  // namespace

size_t estimate_from_similar(std::vector<TraceEntry>& ops) {
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> timed;
  for (const auto& e : ops)
    if (e.device_time && e.device_time->calls > 0)
      timed[similar_key(e)].emplace_back(e.device_time->median_ns, e.device_time->calls);
  size_t n = 0;
  for (auto& e : ops) {
    if ((e.device_time && e.device_time->calls > 0) || e.count == 0) continue;
    auto it = timed.find(similar_key(e));
    if (it == timed.end()) continue;
    DeviceTime d;
    d.estimated_total_ns = e.count * weighted_median(it->second);
    d.from_similar = true;
    if (d.estimated_total_ns == 0) continue;
    e.device_time = d;
    ++n;
  }
  return n;
}

}  // namespace bb::trace
