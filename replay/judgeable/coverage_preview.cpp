#include "replay/judgeable/coverage_preview.h"

#include <filesystem>
#include <iomanip>
#include <sstream>

#include "backends/op_names.h"
#include "replay/judgeable/judgeable.h"
#include "replay/judgeable/random_ops.h"
#include "replay/report/report_writers.h"
#include "tracer/format/trace_summary.h"

namespace bb::replay {
namespace {

bool takes_generator(const trace::TraceEntry& e) {
  for (const auto& a : e.args)
    if (a.type.find("Generator") != std::string::npos) return true;
  return false;
}

bool deterministic(const trace::TraceEntry& e) {
  std::vector<std::pair<std::string, const trace::ArgValue*>> named;
  for (const auto& a : e.args) named.emplace_back(a.name, &a);
  return deterministic_by_arguments(named);
}

std::string share(double part, double whole) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << 100 * part / whole << "%";
  return s.str();
}

}  // namespace

std::set<std::string> backend_ops(const std::string& dir) {
  std::set<std::string> ops;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_directory())
      if (auto op = backends::op_from_folder(entry.path().filename().string())) ops.insert(*op);
  return ops;
}

std::string reason_without_torch(const trace::TraceEntry& e) {
  if (std::string why = bookkeeping(e.op); !why.empty()) return why;
  for (const auto& a : e.args)
    if (std::string why = unrebuildable_argument(a); !why.empty()) return why;
  if (!random_op(e.op) && takes_generator(e) && !deterministic(e))
    return std::string(kRandomOp) + " (takes a generator; not in the table of ops judged by their properties)";
  return "";
}

std::vector<CoverageItem> coverage_items(const trace::Trace& t, const std::set<std::string>& kernels) {
  std::vector<CoverageItem> items;
  for (const auto& e : t.ops) {
    const std::string why = kernels.count(e.op) ? reason_without_torch(e) : kNoKernel;
    items.push_back({e.op, why.empty() ? "" : short_reason(why), e.count, traced_device_us(e)});
  }
  return items;
}

void print_coverage_preview(const trace::Trace& t, const std::string& dir, std::ostream& out) {
  const std::set<std::string> kernels = backend_ops(dir);
  const std::vector<CoverageItem> items = coverage_items(t, kernels);
  const Coverage cov = tally_coverage(items);
  out << "\nbackend " << dir << ": kernels for " << kernels.size() << " ops (by folder name, not compiled)\n";
  out << "  would have " << coverage_line(cov) << "\n";
  for (const auto& n : cov.not_judged)
    out << "    " << std::left << std::setw(44) << n.op << std::right << std::setw(10) << n.calls << " calls"
        << (cov.device_us > 0 ? "  " + share(n.device_us, cov.device_us) + " of device time" : "") << "  " << n.reason
        << "\n";
  std::set<std::string> random;
  for (const auto& e : t.ops)
    if (kernels.count(e.op) && random_op(e.op) && reason_without_torch(e).empty()) random.insert(e.op);
  if (!random.empty()) {
    out << "  judged by their properties (random ops, statistically where the input is large enough):";
    for (const auto& op : random) out << " " << op;
    out << "\n";
  }
  out << "  without torch bbtrace cannot tell, and counts as judged: ops this torch lacks, random ops known only by "
         "their schema's tag (no generator argument in the trace), calls native rejects, kernels that do not build "
         "or decline; bbreplay's report says what it judged\n";
}

}  // namespace bb::replay
