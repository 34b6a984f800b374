#include "replay/report/report_writers.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iomanip>
#include <sstream>

#include "replay/report/case_json.h"

namespace bb::replay {
namespace {

// A message's first line, and how many more there are (compiler output is long; JSON has it whole).
std::string first_line(const std::string& m) {
  const size_t nl = m.find('\n');
  if (nl == std::string::npos) return m;
  const auto more = std::count(m.begin() + static_cast<std::ptrdiff_t>(nl) + 1, m.end(), '\n') + 1;
  return m.substr(0, nl) + " [" + std::to_string(more) + " more lines in the JSON report]";
}

std::string md_cell(const std::string& v) {
  std::string out;
  for (char c : v) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// An op's summed time, or "-" when none of its cases was timed.
std::string time_text(const OpSummary& o, double v) { return o.speedup ? fixed(v) : "-"; }

std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// An op's speedup cell: "flagged" says why there is none.
std::string speedup_text(const OpSummary& o) { return o.flagged ? "flagged" : replay::speedup_text(o.speedup); }

nlohmann::ordered_json withheld(const OpSummary& o) {
  if (o.flagged) return "flagged: a kernel caught cheating on one case has no speedup on any";
  if (!o.speedup && o.unstable) return "every timed case was unstable";
  return nullptr;
}

std::string overall_line(const Overall& o) {
  std::ostringstream s;
  s << o.cases << " cases: " << o.passed << " passed, " << o.failed << " failed, " << o.crashed
    << " crashed or timed out, " << o.skipped << " skipped, " << o.flagged << " flagged";
  if (o.invalid) s << ", " << o.invalid << " invalid (native rejects these calls: a harness defect)";
  s << "; speedup (geometric mean "
    << "over ops) " << replay::speedup_text(o.speedup) << "; ";
  for (size_t k = 0; k < o.perf_at.size(); ++k)
    s << (k ? ", " : "") << "perf@" << fixed(o.perf_at[k].first, 1) << " " << fixed(o.perf_at[k].second, 2);
  return s.str();
}

std::string percent(double part, double whole) { return fixed(whole > 0 ? 100 * part / whole : 0, 1) + "%"; }

// (the five largest shares)
std::string coverage_text(const Coverage& c) {
  std::ostringstream s;
  s << "judged " << percent(static_cast<double>(c.judged_calls), static_cast<double>(c.calls))
    << " of the traced calls (" << c.judged_calls << " of " << c.calls << ")";
  const bool by_time = c.device_us > 0;
  if (by_time) s << ", " << percent(c.judged_device_us, c.device_us) << " of the traced device time";
  if (!c.not_judged.empty()) s << "; not judged, largest first:";
  for (size_t k = 0; k < c.not_judged.size() && k < 5; ++k) {
    const NotJudged& n = c.not_judged[k];
    s << (k ? "," : "") << " " << n.op << " (" << n.reason << ") "
      << (by_time ? percent(n.device_us, c.device_us) + " of device time"
                  : percent(static_cast<double>(n.calls), static_cast<double>(c.calls)) + " of calls");
  }
  if (c.not_judged.size() > 5) s << ", and " << c.not_judged.size() - 5 << " more";
  return s.str();
}

}  // namespace

std::string speedup_text(const std::optional<double>& s) { return s ? fixed(*s) + "x" : "-"; }

std::string coverage_line(const Coverage& c) { return coverage_text(c); }

namespace {

// The random ops' cases judged by their properties, one line each ("" when there are none).
std::string statistics_lines(const Report& r, const char* bullet, bool markdown) {
  std::ostringstream s;
  for (const auto& c : r.cases)
    if (!c.statistics.empty())
      s << bullet << (markdown ? "`" + c.op + "`" : c.op) << " (" << (markdown ? md_cell(c.signature) : c.signature)
        << "): " << (markdown ? md_cell(c.statistics) : c.statistics) << "\n";
  return s.str();
}

class JsonWriter : public ReportWriter {
 public:
  std::string render(const Report& r) const override {
    nlohmann::ordered_json j;
    j["schema"] = "bbreplay-report";
    j["schema_version"] = kReportSchema;
    const auto& m = r.meta;
    j["meta"] = {{"tool", m.tool},     {"trace", m.trace}, {"backend", m.backend},
                 {"device", m.device}, {"torch", m.torch}, {"date", m.date},
                 {"timing", m.timing}, {"seed", m.seed},   {"self_check", m.self_check}};
    if (!m.interrupted.empty()) j["meta"]["interrupted"] = m.interrupted;
    if (!m.seed_source.empty()) j["meta"]["seed_source"] = m.seed_source;
    if (!m.isolation.empty()) j["meta"]["isolation"] = m.isolation;
    const Overall o = r.overall();
    nlohmann::ordered_json perf = nlohmann::ordered_json::array();
    for (const auto& [p, f] : o.perf_at) perf.push_back({{"p", p}, {"fraction", f}});
    j["overall"] = {
        {"cases", o.cases},     {"passed", o.passed},
        {"failed", o.failed},   {"crashed", o.crashed},
        {"skipped", o.skipped}, {"flagged", o.flagged},
        {"invalid", o.invalid}, {"speedup_geomean", o.speedup ? nlohmann::ordered_json(*o.speedup) : nullptr},
        {"perf_at", perf}};
    const Coverage cov = r.coverage();
    nlohmann::ordered_json missed = nlohmann::ordered_json::array();
    for (const auto& n : cov.not_judged)
      missed.push_back({{"op", n.op}, {"reason", n.reason}, {"calls", n.calls}, {"device_us", n.device_us}});
    j["coverage"] = {{"calls", cov.calls},
                     {"judged_calls", cov.judged_calls},
                     {"device_us", cov.device_us > 0 ? nlohmann::ordered_json(cov.device_us) : nullptr},
                     {"judged_device_us", cov.device_us > 0 ? nlohmann::ordered_json(cov.judged_device_us) : nullptr},
                     {"not_judged", missed}};
    j["ops"] = nlohmann::ordered_json::array();
    for (const auto& s : r.ops())
      j["ops"].push_back({{"op", s.op},
                          {"cases", s.cases},
                          {"passed", s.passed},
                          {"failed", s.failed},
                          {"crashed", s.crashed},
                          {"skipped", s.skipped},
                          {"invalid", s.invalid},
                          {"flagged", s.flagged},
                          {"flags", verify::flag_names(s.flags)},
                          {"unstable", s.unstable},
                          {"native_us", s.native_us},
                          {"generated_us", s.generated_us},
                          {"speedup_geomean", s.speedup ? nlohmann::ordered_json(*s.speedup) : nullptr},
                          {"speedup_withheld", withheld(s)}});
    j["cases"] = nlohmann::ordered_json::array();
    const auto flagged = r.flagged_ops();
    for (const auto& c : r.cases) j["cases"].push_back(case_to_json(c, Report::speedup_of(c, flagged)));
    return j.dump(1) + "\n";
  }
};

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_time(const std::optional<Timing>& t, double Timing::*field) { return t ? fixed(*t.*field, 3) : ""; }

class CsvWriter : public ReportWriter {
 public:
  std::string render(const Report& r) const override {
    std::ostringstream s;
    s << "schema_version,op,signature,variant,calls,status,flags,message,max_abs_error,max_rel_error,rtol,atol,"
         "native_median_us,native_q1_us,native_q3_us,generated_median_us,generated_q1_us,generated_q3_us,speedup,"
         "unstable,wall_s\n";
    const auto flagged = r.flagged_ops();
    for (const auto& c : r.cases) {
      const auto sp = Report::speedup_of(c, flagged);
      s << kReportSchema << "," << csv_field(c.op) << "," << csv_field(c.signature) << "," << csv_field(c.variant)
        << "," << c.calls << "," << to_string(c.status) << "," << csv_field(verify::flag_names(c.flags, ";")) << ","
        << csv_field(c.message) << "," << general(c.max_abs_error) << "," << general(c.max_rel_error) << ","
        << general(c.rtol) << "," << general(c.atol) << "," << csv_time(c.native, &Timing::median) << ","
        << csv_time(c.native, &Timing::q1) << "," << csv_time(c.native, &Timing::q3) << ","
        << csv_time(c.generated, &Timing::median) << "," << csv_time(c.generated, &Timing::q1) << ","
        << csv_time(c.generated, &Timing::q3) << "," << (sp ? fixed(*sp, 4) : "") << "," << csv_field(c.unstable) << ","
        << fixed(c.wall_s, 3) << "\n";
    }
    return s.str();
  }
};

// Kernels that called ATen compute ops because the policy allows it: said per op, never silently.
void allowed_aten(const Report& r, std::ostream& s, bool markdown) {
  std::vector<std::pair<std::string, std::string>> seen;  // op, the ATen ops of its first such case
  for (const auto& c : r.cases) {
    if (c.aten_allowed.empty()) continue;
    if (std::any_of(seen.begin(), seen.end(), [&](const auto& p) { return p.first == c.op; })) continue;
    std::string ops;
    for (const auto& a : c.aten_allowed) ops += (ops.empty() ? "" : ", ") + a;
    seen.emplace_back(c.op, ops);
  }
  if (seen.empty()) return;
  s << (markdown
            ? "\n## Kernels that call ATen, as the policy allows (allow_aten)\n\n"
            : "\nkernels that call ATen compute ops, as the policy allows (allow_aten): their times include ATen's\n");
  for (const auto& [op, ops] : seen) s << (markdown ? "- `" + op + "`: " : "  " + op + ": ") << ops << "\n";
}

void problems(const Report& r, std::ostream& s, bool markdown) {
  bool any = false;
  for (const auto& c : r.cases) {
    if (c.status == Status::Passed && c.flags.empty() && c.unstable.empty()) continue;
    if (c.status == Status::Skipped && !markdown) continue;
    if (!any)
      s << (markdown ? "\n## Cases that did not pass, or passed without a stable time\n\n"
                     : "\ncases that did not pass, or passed without a stable time:\n");
    any = true;
    std::string flags = c.flags.empty() ? "" : " [" + verify::flag_names(c.flags, ", ") + "]";
    const std::string message = c.status == Status::Passed ? "times unstable, no speedup: " + c.unstable : c.message;
    if (markdown) {
      s << "- `" << c.op << "` (" << md_cell(c.signature) << "), " << c.variant << ": **" << to_string(c.status) << "**"
        << md_cell(flags) << ": " << md_cell(message) << "\n";
    } else {
      s << "  " << c.op << " (" << c.signature << ") " << c.variant << ": " << to_string(c.status) << flags << ": "
        << first_line(message) << "\n";
    }
  }
}

class MarkdownWriter : public ReportWriter {
 public:
  std::string render(const Report& r) const override {
    std::ostringstream s;
    const auto& m = r.meta;
    s << "# bbreplay report\n\n<!-- bbreplay-report schema " << kReportSchema << " -->\n\n";
    s << "Trace `" << m.trace << "`, backend `" << m.backend << "`, device " << m.device << ", seed " << m.seed
      << ", torch " << m.torch << ", " << m.date << ", " << m.tool << ".  \nTiming: " << m.timing << "\n\n";
    if (!m.isolation.empty()) s << "Isolation of the kernel's processes: " << m.isolation << "\n\n";
    s << "| op | cases | passed | failed | crashed | skipped | flagged | native µs | generated µs | speedup |\n";
    s << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& o : r.ops())
      s << "| `" << o.op << "` | " << o.cases << " | " << o.passed << " | " << o.failed << " | " << o.crashed << " | "
        << o.skipped << " | " << o.flagged << " | " << time_text(o, o.native_us) << " | "
        << time_text(o, o.generated_us) << " | " << speedup_text(o) << " |\n";
    s << "\n**Overall**: " << overall_line(r.overall()) << "\n";
    s << "\n**Coverage**: " << md_cell(coverage_line(r.coverage())) << "\n";
    if (std::string random = statistics_lines(r, "- ", true); !random.empty())
      s << "\n**Random ops judged by their properties**:\n\n" << random;
    if (!m.interrupted.empty()) s << "\n**Interrupted**: " << m.interrupted << "\n";
    allowed_aten(r, s, true);
    problems(r, s, true);
    return s.str();
  }
};

class ConsoleWriter : public ReportWriter {
 public:
  std::string render(const Report& r) const override {
    std::ostringstream s;
    s << std::left << std::setw(36) << "op" << std::right << std::setw(6) << "cases" << std::setw(8) << "passed"
      << std::setw(8) << "failed" << std::setw(9) << "crashed" << std::setw(9) << "skipped" << std::setw(14)
      << "native us" << std::setw(14) << "generated us" << std::setw(9) << "speedup"
      << "  flags\n";
    for (const auto& o : r.ops())
      s << std::left << std::setw(36) << o.op << std::right << std::setw(6) << o.cases << std::setw(8) << o.passed
        << std::setw(8) << o.failed << std::setw(9) << o.crashed << std::setw(9) << o.skipped << std::setw(14)
        << time_text(o, o.native_us) << std::setw(14) << time_text(o, o.generated_us) << std::setw(9) << speedup_text(o)
        << "  " << verify::flag_names(o.flags, ",") << "\n";
    s << overall_line(r.overall()) << "\n";
    s << coverage_line(r.coverage()) << "\n";
    if (std::string random = statistics_lines(r, "  ", false); !random.empty())
      s << "random ops judged by their properties:\n" << random;
    if (!r.meta.interrupted.empty()) s << "INTERRUPTED: " << r.meta.interrupted << "\n";
    allowed_aten(r, s, false);
    problems(r, s, false);
    return s.str();
  }
};

}  // namespace

std::unique_ptr<ReportWriter> make_writer(const std::string& format) {
  if (format == "console") return std::make_unique<ConsoleWriter>();
  if (format == "json") return std::make_unique<JsonWriter>();
  if (format == "csv") return std::make_unique<CsvWriter>();
  if (format == "markdown") return std::make_unique<MarkdownWriter>();
  return nullptr;
}

}  // namespace bb::replay
