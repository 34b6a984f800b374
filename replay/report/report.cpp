#include "replay/report/report.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace bb::replay {
namespace {

std::optional<double> geomean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double log_sum = 0;
  for (double x : v) log_sum += std::log(x);
  return std::exp(log_sum / v.size());
}

template <class Counts>
void count(const CaseResult& c, Counts& n) {
  switch (c.status) {
    case Status::Passed: ++n.passed; break;
    case Status::Failed: ++n.failed; break;
    case Status::Crashed:
    case Status::Timeout: ++n.crashed; break;
    case Status::Skipped: ++n.skipped; break;
    case Status::Invalid: ++n.invalid; break;
  }
  if (!c.flags.empty()) ++n.flagged;
}

}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::Passed: return "passed";
    case Status::Failed: return "failed";
    case Status::Crashed: return "crashed";
    case Status::Timeout: return "timeout";
    case Status::Invalid: return "invalid";
    default: return "skipped";
  }
}

std::optional<double> CaseResult::speedup() const {
  if (status != Status::Passed || !flags.empty() || !unstable.empty() || !native || !generated ||
      generated->median <= 0)
    return std::nullopt;
  return native->median / generated->median;
}

std::set<std::string> Report::flagged_ops() const {
  std::set<std::string> out;
  for (const auto& c : cases)
    if (!c.flags.empty()) out.insert(c.op);
  return out;
}

std::optional<double> Report::speedup_of(const CaseResult& c, const std::set<std::string>& flagged_ops) {
  return flagged_ops.count(c.op) ? std::nullopt : c.speedup();
}

std::vector<OpSummary> Report::ops() const {
  std::vector<OpSummary> out;
  std::map<std::string, size_t> index;
  std::map<std::string, std::vector<double>> speedups;
  for (const auto& c : cases) {
    auto [it, fresh] = index.emplace(c.op, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().op = c.op;
    }
    OpSummary& o = out[it->second];
    ++o.cases;
    count(c, o);
    for (const auto& f : c.flags)
      if (std::find(o.flags.begin(), o.flags.end(), f) == o.flags.end()) o.flags.push_back(f);
    if (c.status == Status::Passed && !c.unstable.empty()) ++o.unstable;
    if (auto s = c.speedup()) {
      speedups[c.op].push_back(*s);
      o.native_us += c.native->median * static_cast<double>(std::max<uint64_t>(c.calls, 1));
      o.generated_us += c.generated->median * static_cast<double>(std::max<uint64_t>(c.calls, 1));
    }
  }
  for (auto& o : out) {
    if (o.flagged) o.native_us = o.generated_us = 0;  // no times shown for a kernel caught cheating
    o.speedup = o.flagged ? std::nullopt : geomean(speedups[o.op]);
  }
  return out;
}

Overall Report::overall() const {
  Overall all;
  for (const auto& c : cases) {
    ++all.cases;
    count(c, all);
  }
  std::vector<double> op_speedups;
  auto summaries = ops();
  for (const auto& o : summaries)
    if (o.speedup) op_speedups.push_back(*o.speedup);
  all.speedup = geomean(op_speedups);
  for (double p : {0.0, 1.0, 1.5, 2.0}) {
    int evaluated = 0, good = 0;
    for (const auto& o : summaries) {
      if (o.cases == o.skipped + o.invalid) continue;
      ++evaluated;
      const bool correct = o.failed == 0 && o.crashed == 0 && o.flagged == 0;
      if (correct && (p == 0.0 || (o.speedup && *o.speedup > p))) ++good;
    }
    all.perf_at.emplace_back(p, evaluated ? static_cast<double>(good) / evaluated : 0.0);
  }
  return all;
}

std::string short_reason(const std::string& message) {
  std::string m = message.substr(0, message.find_first_of(":("));
  while (!m.empty() && m.back() == ' ') m.pop_back();
  return m.size() > 100 ? m.substr(0, 100) + "..." : m.empty() ? "skipped" : m;
}

Coverage tally_coverage(const std::vector<CoverageItem>& items) {
  Coverage cov;
  std::map<std::pair<std::string, std::string>, NotJudged> missed;
  for (const auto& c : items) {
    cov.calls += c.calls;
    cov.device_us += c.device_us;
    if (c.reason.empty()) {
      cov.judged_calls += c.calls;
      cov.judged_device_us += c.device_us;
      continue;
    }
    const std::string& reason = c.reason;
    NotJudged& m = missed[{c.op, reason}];
    m.op = c.op;
    m.reason = reason;
    m.calls += c.calls;
    m.device_us += c.device_us;
  }
  for (auto& [key, n] : missed) cov.not_judged.push_back(n);
  const bool by_time = cov.device_us > 0;
  std::stable_sort(cov.not_judged.begin(), cov.not_judged.end(), [&](const NotJudged& a, const NotJudged& b) {
    return by_time ? a.device_us > b.device_us : a.calls > b.calls;
  });
  return cov;
}

Coverage Report::coverage() const {
  std::vector<CoverageItem> items;
  for (const auto& c : cases) {
    if (c.variant != "traced") continue;
    std::string reason;  // a traced case judged when it reached a verdict
    if (c.status == Status::Invalid) reason = "invalid (native rejects the call)";
    else if (c.status == Status::Skipped)
      reason = short_reason(c.message);
    items.push_back({c.op, reason, c.calls, c.traced_device_us});
  }
  for (const auto& n : meta.not_replayed) items.push_back({n.op, n.reason, n.calls, n.device_us});
  return tally_coverage(items);
}

bool Report::all_passed() const {
  return meta.interrupted.empty() && std::none_of(cases.begin(), cases.end(), [&](const CaseResult& c) {
           return c.status == Status::Failed || c.status == Status::Crashed || c.status == Status::Timeout ||
                  (c.status == Status::Invalid && meta.self_check);
         });
}

}  // namespace bb::replay
