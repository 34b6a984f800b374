#include "replay/cli/written_policy.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <sstream>

#include "policy/verify/flags.h"
#include "replay/report/report_writers.h"

namespace bb::replay::app {

namespace {

// A YAML node or scalar on one line (flow style), as the policy file will hold it.
std::string flow(const YAML::Node& n) {
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << n;
  return e.c_str();
}

std::string quoted(const std::string& s) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << s;
  return e.c_str();
}

// A message fit for a one-line comment.
std::string one_line(std::string s, size_t at_most = 160) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  if (s.size() > at_most) s = s.substr(0, at_most) + "...";
  return s;
}

std::string first_failure(const Report& r, const std::string& op) {
  for (const auto& c : r.cases)
    if (c.op == op && (c.status == Status::Failed || c.status == Status::Crashed || c.status == Status::Timeout))
      return " (" + c.variant + ": " + one_line(c.message.empty() ? to_string(c.status) : c.message) + ")";
  return "";
}

// What the op's cases came to: "4 of 4 cases passed", "3 of 5 cases passed, 2 skipped".
std::string tally(const OpSummary& o) {
  std::ostringstream s;
  s << o.passed << " of " << o.cases << " cases passed";
  if (o.failed) s << ", " << o.failed << " failed";
  if (o.crashed) s << ", " << o.crashed << " crashed";
  if (o.flagged) s << ", " << o.flagged << " flagged";
  if (o.skipped) s << ", " << o.skipped << " skipped";
  if (o.invalid) s << ", " << o.invalid << " invalid";
  return s.str();
}

// Why an op earns no routing; "" when it does.
std::string not_routed(const Report& r, const OpSummary& o, std::optional<double> min_speedup) {
  if (o.flagged) return "flagged " + verify::flag_names(o.flags, ", ");
  if (o.failed || o.crashed) return "failed" + first_failure(r, o.op);
  if (o.passed == 0) return "no case judged";
  if (min_speedup) {
    if (!o.speedup) return "no speedup measured (every timed case unstable or untimed)";
    if (*o.speedup < *min_speedup) return speedup_text(o.speedup) + ", under " + speedup_text(min_speedup);
  }
  return "";
}

}  // namespace

std::string written_policy(const Report& report, const std::string& backend, const std::string& judged_under,
                           std::optional<double> min_speedup) {
  YAML::Node judged = judged_under.empty() ? YAML::Node() : YAML::Load(judged_under);
  std::ostringstream head, ops;
  int routed = 0, left = 0;
  std::ostringstream why_not;
  for (const OpSummary& o : report.ops()) {
    const std::string why = not_routed(report, o, min_speedup);
    if (!why.empty()) {
      why_not << "#   " << o.op << ": " << tally(o) << "; " << why << "\n";
      ++left;
      continue;
    }
    ++routed;
    ops << "  # " << tally(o) << ", "
        << (o.speedup ? speedup_text(o.speedup) + " native's speed" : "no speedup measured") << "\n";
    YAML::Node entry = judged && judged["ops"] ? judged["ops"][o.op] : YAML::Node();
    ops << "  " << flow(YAML::Node(o.op)) << ": " << (entry && !entry.IsNull() ? flow(entry) : "{}") << "\n";
  }
  const ReportMeta& m = report.meta;
  head << "# Written by " << m.tool << " --write-policy: the ops whose kernels passed every case judged";
  if (min_speedup)
    head << " and ran at least " << speedup_text(min_speedup) << " native's speed (geometric mean over cases)";
  head << ".\n# Judged: " << one_line(m.trace, 400) << " on " << m.device << ", " << m.date << ", seed " << m.seed
       << ".\n";
  if (!m.interrupted.empty())
    head << "# The run was interrupted (" << one_line(m.interrupted)
         << "): ops it did not reach are not routed,\n# and an op it reached is judged on the cases it ran.\n";
  if (!judged_under.empty())
    head << "# Judged under a policy: each routed op keeps its entry as written there, and its default.\n";
  head << "# " << routed << (routed == 1 ? " op" : " ops") << " routed, " << left << " not";
  head << (left ? ":\n" + why_not.str() : std::string(".\n"));
  std::ostringstream out;
  out << head.str() << "version: 1\n";
  out << "backend: " << quoted(std::filesystem::absolute(backend).lexically_normal().string()) << "\n";
  if (judged && judged["default"]) out << "default: " << flow(judged["default"]) << "\n";
  out << "ops:" << (routed ? "\n" + ops.str() : " {}\n");
  return out.str();
}

}  // namespace bb::replay::app
