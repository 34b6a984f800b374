#include "tracer/format/trace_summary.h"

#include "tracer/format/device_estimate.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>
#include <vector>

namespace bb::trace {
namespace {

struct OpTotals {
  std::string op;
  uint64_t calls = 0, top_level = 0, leaf = 0, routed = 0;
  size_t signatures = 0;
  bool estimated = false;  // some of its counts are extrapolated from sampled tracing
};

std::vector<OpTotals> totals_by_op(const trace::Trace& t) {
  std::map<std::string, OpTotals> by;
  for (const auto& e : t.ops) {
    OpTotals& o = by[e.op];
    o.op = e.op;
    o.calls += e.count;
    o.top_level += e.top_level();
    o.leaf += e.leaf();
    o.routed += e.routed;
    o.signatures += 1;
    o.estimated = o.estimated || e.seen > 0;
  }
  std::vector<OpTotals> v;
  for (auto& [_, o] : by) v.push_back(o);
  std::stable_sort(v.begin(), v.end(), [](const OpTotals& a, const OpTotals& b) { return a.calls > b.calls; });
  return v;
}

std::string ints_text(const std::vector<int64_t>& v);

std::string shape_text(const trace::TensorMeta& m) {
  std::string s = m.dtype + ints_text(m.shape);
  return m.device == "cpu" ? s : s + "@" + m.device;
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t k = 0; k < v.size(); ++k) s << (k ? "," : "") << v[k];
  s << "]";
  return s.str();
}

// One argument, compactly: tensors as dtype[shape], lists and scalars as values; "" to leave out.
std::string arg_text(const trace::ArgValue& a) {
  using trace::ArgKind;
  switch (a.kind) {
    case ArgKind::Tensor: return shape_text(*a.tensors[0]);
    case ArgKind::IntList: return ints_text(a.ints);
    case ArgKind::Int: return std::to_string(a.i);
    case ArgKind::Bool: return a.b ? "True" : "False";
    case ArgKind::Float: {
      std::ostringstream s;
      s << a.f;
      return s.str();
    }
    case ArgKind::ScalarType: return a.text;
    case ArgKind::TensorList:
    case ArgKind::OptTensorList: return "[" + std::to_string(a.tensors.size()) + " tensors]";
    default: return "";
  }
}

}  // namespace

double traced_device_us(const trace::TraceEntry& e) { return static_cast<double>(trace::estimated_ns(e)) / 1000.0; }

std::string signature_text(const trace::TraceEntry& e) { return args_text(e.args); }

std::string args_text(const std::vector<trace::ArgValue>& args) {
  std::ostringstream s;
  bool first = true;
  for (const auto& a : args) {
    std::string text = arg_text(a);
    if (text.empty()) continue;
    s << (first ? "" : ", ") << text;
    first = false;
  }
  return s.str();
}

namespace {

void print_header(const trace::Trace& t, const std::string& source, std::ostream& out) {
  const auto& m = t.meta;
  out << "trace " << source << "\n";
  std::string facts;
  auto add = [&facts](const std::string& f) { facts += (facts.empty() ? "" : ", ") + f; };
  if (!m.torch.empty()) add("torch " + m.torch);
  if (m.pid) add("pid " + std::to_string(m.pid));
  if (m.rank) add("rank " + std::to_string(*m.rank));
  if (!m.status.empty()) add("status " + m.status);
  if (!m.updated.empty()) add("written " + m.updated);
  if (m.tool.rfind("bbshim", 0) != 0 && !m.tool.empty()) add("from a " + m.tool);
  out << "  " << facts << "\n";
  if (!m.argv.empty()) {
    out << "  command:";
    for (const auto& a : m.argv) out << " " << a;
    out << "\n";
  }
  out << "  devices: cpu";
  for (const auto& d : m.devices) out << ", " << d.device << (d.name.empty() ? "" : " (" + d.name + ")");
  out << "\n";
  if (const auto& d = m.device_timing) {
    out << "  device timing: " << d->status << "; " << d->calls_timed << " calls timed";
    if (!d->sampled.empty()) out << " (" << (d->mode.empty() ? "" : d->mode + ": ") << d->sampled << ")";
    if (d->unattributed)
      out << ", " << d->unattributed << " device activities outside any op (" << std::fixed << std::setprecision(3)
          << static_cast<double>(d->unattributed_ns) / 1e6 << " ms)" << std::defaultfloat;
    if (d->dropped_records) out << ", " << d->dropped_records << " records dropped by CUPTI";
    if (d->incomplete_calls) out << ", " << d->incomplete_calls << " calls unfinished at exit (not timed)";
    if (d->cupti_overhead_records || d->control_ns)
      out << "; CUPTI's own overhead " << std::fixed << std::setprecision(3)
          << static_cast<double>(d->cupti_overhead_ns) / 1e6 << " ms, attaching and detaching "
          << static_cast<double>(d->control_ns) / 1e6 << " ms" << std::defaultfloat;
    out << "\n";
  }
  if (const auto& tr = m.tracing) {
    out << "  tracing: sampled, " << tr->sampled << "; " << tr->calls_seen << " of ~" << m.calls
        << " calls seen; every call traced " << std::fixed << std::setprecision(2) << tr->full_s << " s, sampled "
        << tr->sampled_s << " s" << std::defaultfloat << "\n";
  }
}

struct OpDeviceTime {
  std::string op;
  uint64_t calls = 0, timed = 0, total_ns = 0, timed_ns = 0;  // total_ns: all calls (estimated where not timed)
  bool estimated = false;                                     // some of its entries' totals are estimates
  std::map<std::string, uint64_t> kernels;
};

// Ops by the device time their own launches took (CUPTI), largest first. Where the trace estimates
// the device time of calls not timed (tracer/format/device_estimate.h), the op's total is marked "~".
void print_device_time(const trace::Trace& t, size_t top, std::ostream& out) {
  std::map<std::string, OpDeviceTime> by;
  uint64_t all = 0;
  bool estimated = false;
  for (const auto& e : t.ops) {
    if (!e.device_time) continue;
    OpDeviceTime& o = by[e.op];
    o.op = e.op;
    o.calls += e.count;
    o.timed += e.device_time->calls;
    o.timed_ns += e.device_time->total_ns;
    const uint64_t ns = trace::estimated_ns(e);
    o.total_ns += ns;
    o.estimated = o.estimated || e.device_time->estimated_total_ns > 0 || e.seen > 0;
    all += ns;
    for (const auto& k : e.kernels) o.kernels[k.name] += k.launches;
  }
  if (by.empty() || all == 0) return;
  std::vector<OpDeviceTime> v;
  for (auto& [_, o] : by) v.push_back(std::move(o));
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  for (const auto& o : v) estimated = estimated || o.estimated;
  out << "\ntop ops by device time (kernels, copies and sets each call launched itself"
      << (estimated ? "; ~: extrapolated to all calls from the timed ones, or from signatures equal but for "
                      "float scalars where none was timed, and to the calls sampled tracing did not see"
                    : "")
      << ")\n";
  out << "  " << std::left << std::setw(44) << "op" << std::right << std::setw(10) << "calls" << std::setw(10)
      << "timed" << std::setw(13) << "total ms" << std::setw(8) << "share" << std::setw(12) << "us/call"
      << "  most launched\n";
  for (size_t k = 0; k < v.size() && k < top; ++k) {
    const auto& o = v[k];
    std::string kernel;
    uint64_t most = 0;
    for (const auto& [name, n] : o.kernels)
      if (n > most) most = n, kernel = name;
    if (kernel.size() > 60) kernel = kernel.substr(0, 57) + "...";
    std::ostringstream total;
    total << (o.estimated ? "~" : "") << std::fixed << std::setprecision(3) << static_cast<double>(o.total_ns) / 1e6;
    out << "  " << std::left << std::setw(44) << o.op << std::right << std::setw(10) << o.calls << std::setw(10)
        << o.timed << std::setw(13) << total.str() << std::fixed << std::setprecision(1) << std::setw(7)
        << 100.0 * static_cast<double>(o.total_ns) / static_cast<double>(all) << "%" << std::setprecision(2)
        << std::setw(12);
    if (o.timed) out << static_cast<double>(o.timed_ns) / 1e3 / static_cast<double>(o.timed);
    else
      out << "-";
    out << std::defaultfloat << "  " << kernel << "\n";
  }
  if (v.size() > top) out << "  ... " << v.size() - top << " more ops\n";
}

}  // namespace

void print_summary(const trace::Trace& t, const std::string& source, const SummaryOptions& options, std::ostream& out) {
  print_header(t, source, out);
  auto ops = totals_by_op(t);
  uint64_t calls = 0;
  for (const auto& o : ops) calls += o.calls;
  const bool sampled = std::any_of(ops.begin(), ops.end(), [](const OpTotals& o) { return o.estimated; });
  out << "  " << (sampled ? "~" : "") << calls << " calls, " << t.ops.size() << " signatures, " << ops.size() << " ops";
  if (t.meta.untraced_calls) out << ", " << t.meta.untraced_calls << " calls past the signature limit";
  out << "\n\n";
  out << "top ops by calls (top-level: not called from another op; leaf: called no other op"
      << (sampled ? "; ~: extrapolated from the calls sampled tracing saw" : "") << ")\n";
  const bool routing = std::any_of(ops.begin(), ops.end(), [](const OpTotals& o) { return o.routed > 0; });
  out << "  " << std::left << std::setw(44) << "op" << std::right << std::setw(10) << "calls" << std::setw(7) << "sigs"
      << std::setw(11) << "top-level" << std::setw(10) << "leaf" << (routing ? "    routed" : "") << "\n";
  for (size_t k = 0; k < ops.size() && k < options.top; ++k) {
    const auto& o = ops[k];
    out << "  " << std::left << std::setw(44) << o.op << std::right << std::setw(10)
        << (o.estimated ? "~" : "") + std::to_string(o.calls) << std::setw(7) << o.signatures << std::setw(11)
        << o.top_level << std::setw(10) << o.leaf;
    if (routing) out << std::setw(10) << o.routed;
    out << "\n";
  }
  if (ops.size() > options.top) out << "  ... " << ops.size() - options.top << " more ops\n";
  print_device_time(t, options.top, out);
  if (options.signatures == 0) return;
  std::vector<const trace::TraceEntry*> sigs;
  for (const auto& e : t.ops) sigs.push_back(&e);
  std::stable_sort(sigs.begin(), sigs.end(), [](auto* a, auto* b) { return a->count > b->count; });
  out << "\ntop signatures by calls\n";
  for (size_t k = 0; k < sigs.size() && k < options.signatures; ++k)
    out << "  " << std::setw(8) << (sigs[k]->seen ? "~" : "") + std::to_string(sigs[k]->count) << "  " << sigs[k]->op
        << "(" << signature_text(*sigs[k]) << ")\n";
}

}  // namespace bb::trace
