#include "tracer/format/trace_yaml.h"

#include "tracer/format/op_name.h"
#include "tracer/format/yaml_read.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace bb::trace {

namespace {

// ---------------------------------------------------------------- writing

std::string format_float(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back exactly
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void emit_ints(YAML::Emitter& out, const std::vector<int64_t>& v) {
  out << YAML::Flow << YAML::BeginSeq;
  for (auto x : v) out << x;
  out << YAML::EndSeq;
}

void emit_tensor_fields(YAML::Emitter& out, const TensorMeta& t) {
  out << YAML::Key << "dtype" << YAML::Value << t.dtype;
  if (t.symbolic) {
    out << YAML::Key << "symbolic" << YAML::Value << true;
  } else {
    out << YAML::Key << "shape" << YAML::Value;
    emit_ints(out, t.shape);
    if (t.layout == "strided") {
      out << YAML::Key << "stride" << YAML::Value;
      emit_ints(out, t.stride);
    }
  }
  out << YAML::Key << "device" << YAML::Value << t.device;
  if (t.layout != "strided") out << YAML::Key << "layout" << YAML::Value << t.layout;
  if (t.offset != 0) out << YAML::Key << "offset" << YAML::Value << t.offset;
  if (t.range) {
    out << YAML::Key << "range" << YAML::Value;
    emit_ints(out, {t.range->first, t.range->second});
  }
}

void emit_tensor_list(YAML::Emitter& out, const std::vector<std::optional<TensorMeta>>& ts) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& t : ts) {
    if (!t) {
      out << YAML::Null;
      continue;
    }
    out << YAML::Flow << YAML::BeginMap;
    emit_tensor_fields(out, *t);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void emit_value(YAML::Emitter& out, const ArgValue& a) {
  out << YAML::Key << "value" << YAML::Value;
  switch (a.kind) {
    case ArgKind::Int: out << a.i; break;
    case ArgKind::Float: out << format_float(a.f); break;
    case ArgKind::Bool: out << a.b; break;
    case ArgKind::Complex:
      out << YAML::Flow << YAML::BeginSeq << format_float(a.c.real()) << format_float(a.c.imag()) << YAML::EndSeq;
      break;
    case ArgKind::String: out << YAML::DoubleQuoted << a.text; break;
    case ArgKind::IntList: emit_ints(out, a.ints); break;
    case ArgKind::FloatList:
      out << YAML::Flow << YAML::BeginSeq;
      for (double x : a.floats) out << format_float(x);
      out << YAML::EndSeq;
      break;
    case ArgKind::BoolList:
      out << YAML::Flow << YAML::BeginSeq;
      for (bool x : a.bools) out << x;
      out << YAML::EndSeq;
      break;
    case ArgKind::TensorList:
    case ArgKind::OptTensorList: emit_tensor_list(out, a.tensors); break;
    default: out << YAML::DoubleQuoted << a.text; break;  // dtype, layout, device, ... names
  }
}

bool has_value(ArgKind k) {
  return k != ArgKind::None && k != ArgKind::Tensor && k != ArgKind::Generator && k != ArgKind::Symbolic;
}

void emit_arg(YAML::Emitter& out, const ArgValue& a) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << a.name;
  out << YAML::Key << "type" << YAML::Value << YAML::DoubleQuoted << a.type;
  out << YAML::Key << "kind" << YAML::Value << to_string(a.kind);
  if (a.kwarg_only) out << YAML::Key << "kwarg_only" << YAML::Value << true;
  if (a.kind == ArgKind::Tensor && !a.tensors.empty() && a.tensors[0]) emit_tensor_fields(out, *a.tensors[0]);
  if (has_value(a.kind)) emit_value(out, a);
  out << YAML::EndMap;
}

void emit_kernels(YAML::Emitter& out, const std::vector<KernelCount>& kernels) {
  out << YAML::BeginSeq;
  for (const auto& k : kernels)
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << k.name
        << YAML::Key << "launches" << YAML::Value << k.launches << YAML::EndMap;
  out << YAML::EndSeq;
}

void emit_devices(YAML::Emitter& out, const std::vector<DeviceInfo>& devices) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& d : devices)
    out << YAML::BeginMap << YAML::Key << "device" << YAML::Value << d.device << YAML::Key << "name" << YAML::Value
        << YAML::DoubleQuoted << d.name << YAML::EndMap;
  out << YAML::EndSeq;
}

// A merged trace's processes (bbtrace merge), one flow map each.
void emit_processes(YAML::Emitter& out, const std::vector<ProcessInfo>& processes) {
  out << YAML::Key << "merged_from" << YAML::Value << YAML::BeginSeq;
  for (const auto& p : processes) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "file" << YAML::Value << YAML::DoubleQuoted << p.file;
    out << YAML::Key << "pid" << YAML::Value << p.pid;
    if (p.rank) out << YAML::Key << "rank" << YAML::Value << *p.rank;
    out << YAML::Key << "hostname" << YAML::Value << YAML::DoubleQuoted << p.hostname;
    out << YAML::Key << "status" << YAML::Value << YAML::DoubleQuoted << p.status;
    out << YAML::Key << "created" << YAML::Value << YAML::DoubleQuoted << p.created;
    out << YAML::Key << "updated" << YAML::Value << YAML::DoubleQuoted << p.updated;
    out << YAML::Key << "calls" << YAML::Value << p.calls;
    out << YAML::Key << "argv" << YAML::Value << YAML::BeginSeq;
    for (const auto& a : p.argv) out << YAML::DoubleQuoted << a;
    out << YAML::EndSeq << YAML::Key << "devices" << YAML::Value;
    emit_devices(out, p.devices);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void emit_events(YAML::Emitter& out, const std::vector<TimingEvent>& events) {
  out << YAML::Key << "events" << YAML::Value << YAML::BeginSeq;
  for (const auto& e : events)
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "t" << YAML::Value << YAML::Precision(15) << e.t << YAML::Key
        << "what" << YAML::Value << YAML::DoubleQuoted << e.what << YAML::EndMap;
  out << YAML::EndSeq;
}

void emit_tracing(YAML::Emitter& out, const TracingInfo& t) {
  out << YAML::Key << "tracing" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "sampled" << YAML::Value << YAML::DoubleQuoted << t.sampled;
  out << YAML::Key << "calls_seen" << YAML::Value << t.calls_seen;
  out << YAML::Key << "full_s" << YAML::Value << YAML::Precision(6) << t.full_s;
  out << YAML::Key << "sampled_s" << YAML::Value << YAML::Precision(6) << t.sampled_s;
  out << YAML::Key << "to_sampled" << YAML::Value << t.to_sampled;
  out << YAML::Key << "scale" << YAML::Value << YAML::Precision(6) << t.scale;
  if (!t.events.empty()) emit_events(out, t.events);
  out << YAML::EndMap;
}

void emit_meta(YAML::Emitter& out, const TraceMeta& m) {
  out << YAML::Key << "meta" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "tool" << YAML::Value << YAML::DoubleQuoted << m.tool;
  out << YAML::Key << "torch" << YAML::Value << YAML::DoubleQuoted << m.torch;
  out << YAML::Key << "created" << YAML::Value << YAML::DoubleQuoted << m.created;
  out << YAML::Key << "updated" << YAML::Value << YAML::DoubleQuoted << m.updated;
  out << YAML::Key << "status" << YAML::Value << YAML::DoubleQuoted << m.status;
  out << YAML::Key << "pid" << YAML::Value << m.pid;
  if (m.rank) out << YAML::Key << "rank" << YAML::Value << *m.rank;
  if (m.world_size) out << YAML::Key << "world_size" << YAML::Value << *m.world_size;
  out << YAML::Key << "hostname" << YAML::Value << YAML::DoubleQuoted << m.hostname;
  out << YAML::Key << "argv" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& a : m.argv) out << YAML::DoubleQuoted << a;
  out << YAML::EndSeq;
  out << YAML::Key << "devices" << YAML::Value;
  if (m.devices.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& d : m.devices) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "device" << YAML::Value << d.device << YAML::Key << "name"
        << YAML::Value << YAML::DoubleQuoted << d.name << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "calls" << YAML::Value << m.calls;
  out << YAML::Key << "untraced_calls" << YAML::Value << m.untraced_calls;
  if (m.tracing) emit_tracing(out, *m.tracing);
  if (const auto& d = m.device_timing) {
    out << YAML::Key << "device_timing" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "status" << YAML::Value << YAML::DoubleQuoted << d->status;
    out << YAML::Key << "calls_timed" << YAML::Value << d->calls_timed;
    out << YAML::Key << "dropped_records" << YAML::Value << d->dropped_records;
    out << YAML::Key << "unfinished_records" << YAML::Value << d->unfinished_records;
    out << YAML::Key << "incomplete_calls" << YAML::Value << d->incomplete_calls;
    if (!d->mode.empty()) out << YAML::Key << "mode" << YAML::Value << d->mode;
    if (!d->sampled.empty()) {
      out << YAML::Key << "sampled" << YAML::Value << YAML::DoubleQuoted << d->sampled;
      out << YAML::Key << "windows" << YAML::Value << d->windows;
      out << YAML::Key << "detaches" << YAML::Value << d->detaches;
      out << YAML::Key << "cut_calls" << YAML::Value << d->cut_calls;
      out << YAML::Key << "untracked_launches" << YAML::Value << d->untracked_launches;
      out << YAML::Key << "control_ns" << YAML::Value << d->control_ns;
      if (d->mode == "first-calls") out << YAML::Key << "signatures_short" << YAML::Value << d->signatures_short;
    }
    if (!d->events.empty()) emit_events(out, d->events);
    if (d->cupti_overhead_records) {
      out << YAML::Key << "cupti_overhead_ns" << YAML::Value << d->cupti_overhead_ns;
      out << YAML::Key << "cupti_overhead_records" << YAML::Value << d->cupti_overhead_records;
    }
    out << YAML::Key << "unattributed" << YAML::Value << d->unattributed;
    out << YAML::Key << "unattributed_ns" << YAML::Value << d->unattributed_ns;
    if (!d->unattributed_kernels.empty()) {
      out << YAML::Key << "unattributed_kernels" << YAML::Value;
      emit_kernels(out, d->unattributed_kernels);
    }
    out << YAML::EndMap;
  }
  if (!m.merged_from.empty()) emit_processes(out, m.merged_from);
  out << YAML::EndMap;
}

void emit_entry(YAML::Emitter& out, const TraceEntry& e) {
  out << YAML::BeginMap;
  out << YAML::Key << "op" << YAML::Value << e.op;
  out << YAML::Key << "count" << YAML::Value << e.count;
  out << YAML::Key << "nested" << YAML::Value << e.nested;
  out << YAML::Key << "with_children" << YAML::Value << e.with_children;
  if (e.routed) out << YAML::Key << "routed" << YAML::Value << e.routed;
  if (e.seen) out << YAML::Key << "seen" << YAML::Value << e.seen;
  if (e.floats_merged) out << YAML::Key << "floats_merged" << YAML::Value << true;
  out << YAML::Key << "args" << YAML::Value;
  if (e.args.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& a : e.args) emit_arg(out, a);
  out << YAML::EndSeq;
  if (const auto& d = e.device_time) {
    out << YAML::Key << "device_time" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "calls" << YAML::Value << d->calls;
    out << YAML::Key << "total_ns" << YAML::Value << d->total_ns;
    out << YAML::Key << "min_ns" << YAML::Value << d->min_ns;
    out << YAML::Key << "median_ns" << YAML::Value << d->median_ns;
    out << YAML::Key << "max_ns" << YAML::Value << d->max_ns;
    if (d->estimated_total_ns) out << YAML::Key << "estimated_total_ns" << YAML::Value << d->estimated_total_ns;
    if (d->from_similar) out << YAML::Key << "from_similar" << YAML::Value << true;
    out << YAML::EndMap;
  }
  if (!e.kernels.empty()) {
    out << YAML::Key << "kernels" << YAML::Value;
    emit_kernels(out, e.kernels);
  }
  out << YAML::EndMap;
}

// ---------------------------------------------------------------- reading

class Reader : public yaml::Reader {
 public:
  using yaml::Reader::Reader;

  TensorMeta tensor(const YAML::Node& n) const {
    if (!n.IsMap()) fail(n, "expected a tensor (a map with dtype, shape, stride, device)");
    TensorMeta t;
    t.dtype = dtype(require(n, "dtype"));
    t.symbolic = optional<bool>(n, "symbolic", false, "true or false");
    t.layout = optional<std::string>(n, "layout", "strided", "a layout name");
    if (!t.symbolic) {
      // Checked before the sizes are read; each costs memory and later code loops over them.
      if (const YAML::Node shape = require(n, "shape"); shape.IsSequence() && shape.size() > format::kMaxRank)
        fail(shape, "a tensor of " + std::to_string(shape.size()) + " dimensions; the limit is " +
                        std::to_string(format::kMaxRank));
      t.shape = non_negative(n["shape"], list<int64_t>(require(n, "shape"), "integers"), "a size");
      // PyTorch makes no tensor with a negative stride (empty_strided rejects one).
      if (t.layout == "strided")
        t.stride = non_negative(n["stride"], list<int64_t>(require(n, "stride"), "integers"), "a stride");
      if (t.stride.size() != t.shape.size() && t.layout == "strided")
        fail(n["stride"],
             "stride has " + std::to_string(t.stride.size()) + " entries, shape " + std::to_string(t.shape.size()));
    }
    t.device = scalar<std::string>(require(n, "device"), "a device such as cpu or cuda:0");
    t.offset = optional<int64_t>(n, "offset", 0, "an integer");
    if (t.offset < 0) fail(n["offset"], "expected an offset >= 0, got " + std::to_string(t.offset));
    if (const char* why = unaddressable(t)) fail(n["shape"] ? n["shape"] : n, why);
    if (YAML::Node r = n["range"]) {
      auto v = list<int64_t>(r, "integers");
      if (v.size() != 2 || v[0] > v[1]) fail(r, "expected range [min, max] with min <= max");
      t.range = std::make_pair(v[0], v[1]);
    }
    return t;
  }

  std::string dtype(const YAML::Node& n) const {
    std::string name = scalar<std::string>(n, "a dtype name");
    if (!is_dtype_name(name)) fail(n, "unknown dtype '" + name + "'");
    return name;
  }

  std::vector<int64_t> non_negative(const YAML::Node& list, std::vector<int64_t> v, const char* what) const {
    for (size_t k = 0; k < v.size(); ++k)
      if (v[k] < 0) fail(list[k], std::string("expected ") + what + " >= 0, got " + std::to_string(v[k]));
    return v;
  }

  std::vector<std::optional<TensorMeta>> tensors(const YAML::Node& n, bool nullable) const {
    if (!n.IsSequence()) fail(n, "expected a list of tensors");
    std::vector<std::optional<TensorMeta>> out;
    for (const auto& x : n) {
      if (x.IsNull() && nullable) {
        out.emplace_back();
      } else {
        out.emplace_back(tensor(x));
      }
    }
    return out;
  }

  double real(const YAML::Node& n) const { return scalar<double>(n, "a number"); }

  void value(const YAML::Node& map, ArgValue& a) const {
    YAML::Node v = require(map, "value");
    switch (a.kind) {
      case ArgKind::Int: a.i = scalar<int64_t>(v, "an integer"); break;
      case ArgKind::Float: a.f = real(v); break;
      case ArgKind::Bool: a.b = scalar<bool>(v, "true or false"); break;
      case ArgKind::Complex:
        if (!v.IsSequence() || v.size() != 2) fail(v, "expected [real, imag]");
        a.c = {real(v[0]), real(v[1])};
        break;
      case ArgKind::IntList: a.ints = list<int64_t>(v, "integers"); break;
      case ArgKind::FloatList:
        if (!v.IsSequence()) fail(v, "expected a list of numbers");
        for (const auto& x : v) a.floats.push_back(real(x));
        break;
      case ArgKind::BoolList:
        for (bool x : list<bool>(v, "true or false")) a.bools.push_back(x);
        break;
      case ArgKind::TensorList: a.tensors = tensors(v, false); break;
      case ArgKind::OptTensorList: a.tensors = tensors(v, true); break;
      case ArgKind::ScalarType: a.text = dtype(v); break;
      default: a.text = scalar<std::string>(v, "a string"); break;
    }
  }

  ArgValue arg(const YAML::Node& n) const {
    if (!n.IsMap()) fail(n, "expected an argument (a map with name, type, kind)");
    ArgValue a;
    a.name = scalar<std::string>(require(n, "name"), "an argument name");
    a.type = optional<std::string>(n, "type", "", "a schema type");
    YAML::Node k = require(n, "kind");
    auto kind = arg_kind_from_string(scalar<std::string>(k, "an argument kind"));
    if (!kind) fail(k, "unknown argument kind '" + k.Scalar() + "'");
    a.kind = *kind;
    a.kwarg_only = optional<bool>(n, "kwarg_only", false, "true or false");
    if (a.kind == ArgKind::Tensor) a.tensors.emplace_back(tensor(n));
    if (has_value(a.kind)) value(n, a);
    return a;
  }

  TraceEntry entry(const YAML::Node& n) const {
    if (!n.IsMap()) fail(n, "expected an op entry (a map with op, count, args)");
    TraceEntry e;
    e.op = scalar<std::string>(require(n, "op"), "an op name such as aten::add.Tensor");
    if (e.op.find("::") == std::string::npos) fail(n["op"], "op name '" + e.op + "' has no namespace (aten::...)");
    if (!plausible_op_name(e.op))
      fail(n["op"], "op name '" + e.op + "' has characters no op name has (letters, digits, '_', '.', ':' only)");
    e.count = scalar<uint64_t>(require(n, "count"), "a non-negative integer");
    e.nested = optional<uint64_t>(n, "nested", 0, "a non-negative integer");
    e.with_children = optional<uint64_t>(n, "with_children", 0, "a non-negative integer");
    if (e.nested > e.count) fail(n["nested"], "nested exceeds count");
    if (e.with_children > e.count) fail(n["with_children"], "with_children exceeds count");
    e.routed = optional<uint64_t>(n, "routed", 0, "a non-negative integer");
    if (e.routed > e.count) fail(n["routed"], "routed exceeds count");
    e.seen = optional<uint64_t>(n, "seen", 0, "a non-negative integer");
    if (e.seen > e.count) fail(n["seen"], "seen exceeds count (count is the calls seen and extrapolated)");
    e.floats_merged = optional<bool>(n, "floats_merged", false, "true or false");
    if (YAML::Node args = n["args"]) {
      if (!args.IsSequence()) fail(args, "expected a list of arguments");
      for (const auto& a : args) e.args.push_back(arg(a));
    }
    if (YAML::Node d = n["device_time"]) {
      if (!d.IsMap()) fail(d, "expected device_time to be a map (calls, total_ns, min_ns, median_ns, max_ns)");
      DeviceTime t;
      t.calls = scalar<uint64_t>(require(d, "calls"), "a non-negative integer");
      t.total_ns = scalar<uint64_t>(require(d, "total_ns"), "a non-negative integer");
      t.min_ns = scalar<uint64_t>(require(d, "min_ns"), "a non-negative integer");
      t.median_ns = scalar<uint64_t>(require(d, "median_ns"), "a non-negative integer");
      t.max_ns = scalar<uint64_t>(require(d, "max_ns"), "a non-negative integer");
      if (t.min_ns > t.median_ns || t.median_ns > t.max_ns) fail(d, "expected min_ns <= median_ns <= max_ns");
      if (t.calls > e.count) fail(d["calls"], "device_time calls exceed count");
      t.estimated_total_ns = optional<uint64_t>(d, "estimated_total_ns", 0, "a non-negative integer");
      if (t.estimated_total_ns && t.estimated_total_ns < t.total_ns)
        fail(d["estimated_total_ns"], "estimated_total_ns is below total_ns");
      t.from_similar = optional<bool>(d, "from_similar", false, "true or false");
      if (t.from_similar && (t.calls != 0 || t.estimated_total_ns == 0))
        fail(d["from_similar"], "from_similar needs calls: 0 and an estimated_total_ns");
      e.device_time = t;
    }
    if (YAML::Node k = n["kernels"]) e.kernels = kernels(k);
    return e;
  }

  std::vector<KernelCount> kernels(const YAML::Node& n) const {
    if (!n.IsSequence()) fail(n, "expected a list of kernels ({name, launches})");
    std::vector<KernelCount> out;
    for (const auto& k : n)
      out.push_back({scalar<std::string>(require(k, "name"), "a kernel name"),
                     scalar<uint64_t>(require(k, "launches"), "a non-negative integer")});
    return out;
  }

  std::vector<DeviceInfo> devices(const YAML::Node& d) const {
    if (!d.IsSequence()) fail(d, "expected a list of devices");
    std::vector<DeviceInfo> out;
    for (const auto& x : d)
      out.push_back(
          {scalar<std::string>(require(x, "device"), "a device"), optional<std::string>(x, "name", "", "a string")});
    return out;
  }

  ProcessInfo process(const YAML::Node& n) const {
    if (!n.IsMap()) fail(n, "expected a process (a map with file, pid, rank, argv, ...)");
    ProcessInfo p;
    p.file = optional<std::string>(n, "file", "", "a string");
    p.pid = optional<int64_t>(n, "pid", 0, "an integer");
    if (n["rank"]) p.rank = scalar<int64_t>(n["rank"], "an integer");
    p.hostname = optional<std::string>(n, "hostname", "", "a string");
    p.status = optional<std::string>(n, "status", "", "a string");
    p.created = optional<std::string>(n, "created", "", "a timestamp");
    p.updated = optional<std::string>(n, "updated", "", "a timestamp");
    p.calls = optional<uint64_t>(n, "calls", 0, "a non-negative integer");
    if (n["argv"]) p.argv = list<std::string>(n["argv"], "strings");
    if (YAML::Node d = n["devices"]) p.devices = devices(d);
    return p;
  }

  std::vector<TimingEvent> events(const YAML::Node& n) const {
    if (!n.IsSequence()) fail(n, "expected events to be a list of {t: seconds, what: text}");
    std::vector<TimingEvent> out;
    for (const auto& x : n) {
      if (!x.IsMap()) fail(x, "expected an event (a map with t and what)");
      if (!x["t"]) fail(x, "an event needs t (CLOCK_MONOTONIC seconds)");
      out.push_back({scalar<double>(x["t"], "a number of seconds"), optional<std::string>(x, "what", "", "a string")});
    }
    return out;
  }

  TraceMeta meta(const YAML::Node& n) const {
    TraceMeta m;
    if (!n) return m;
    if (!n.IsMap()) fail(n, "expected 'meta' to be a map");
    m.tool = optional<std::string>(n, "tool", "", "a string");
    m.torch = optional<std::string>(n, "torch", "", "a string");
    m.created = optional<std::string>(n, "created", "", "a timestamp");
    m.updated = optional<std::string>(n, "updated", "", "a timestamp");
    m.status = optional<std::string>(n, "status", "", "a string");
    m.pid = optional<int64_t>(n, "pid", 0, "an integer");
    if (n["rank"]) m.rank = scalar<int64_t>(n["rank"], "an integer");
    if (n["world_size"]) m.world_size = scalar<int64_t>(n["world_size"], "an integer");
    m.hostname = optional<std::string>(n, "hostname", "", "a string");
    if (n["argv"]) m.argv = list<std::string>(n["argv"], "strings");
    if (YAML::Node d = n["devices"]) m.devices = devices(d);
    m.calls = optional<uint64_t>(n, "calls", 0, "a non-negative integer");
    m.untraced_calls = optional<uint64_t>(n, "untraced_calls", 0, "a non-negative integer");
    if (YAML::Node d = n["tracing"]) {
      if (!d.IsMap()) fail(d, "expected tracing to be a map");
      TracingInfo t;
      t.sampled = optional<std::string>(d, "sampled", "", "a string");
      t.calls_seen = optional<uint64_t>(d, "calls_seen", 0, "a non-negative integer");
      t.full_s = optional<double>(d, "full_s", 0.0, "a number of seconds");
      t.sampled_s = optional<double>(d, "sampled_s", 0.0, "a number of seconds");
      t.to_sampled = optional<uint64_t>(d, "to_sampled", 0, "a non-negative integer");
      t.scale = optional<double>(d, "scale", 0.0, "a number");
      if (YAML::Node e = d["events"]) t.events = events(e);
      m.tracing = t;
    }
    if (YAML::Node d = n["device_timing"]) {
      if (!d.IsMap()) fail(d, "expected device_timing to be a map");
      DeviceTiming t;
      t.status = optional<std::string>(d, "status", "", "a string");
      t.calls_timed = optional<uint64_t>(d, "calls_timed", 0, "a non-negative integer");
      t.dropped_records = optional<uint64_t>(d, "dropped_records", 0, "a non-negative integer");
      t.unfinished_records = optional<uint64_t>(d, "unfinished_records", 0, "a non-negative integer");
      t.incomplete_calls = optional<uint64_t>(d, "incomplete_calls", 0, "a non-negative integer");
      t.mode = optional<std::string>(d, "mode", "", "a string");
      t.sampled = optional<std::string>(d, "sampled", "", "a string");
      t.control_ns = optional<uint64_t>(d, "control_ns", 0, "a non-negative integer");
      t.signatures_short = optional<uint64_t>(d, "signatures_short", 0, "a non-negative integer");
      t.cupti_overhead_ns = optional<uint64_t>(d, "cupti_overhead_ns", 0, "a non-negative integer");
      t.cupti_overhead_records = optional<uint64_t>(d, "cupti_overhead_records", 0, "a non-negative integer");
      t.windows = optional<uint64_t>(d, "windows", 0, "a non-negative integer");
      t.detaches = optional<uint64_t>(d, "detaches", 0, "a non-negative integer");
      t.cut_calls = optional<uint64_t>(d, "cut_calls", 0, "a non-negative integer");
      t.untracked_launches = optional<uint64_t>(d, "untracked_launches", 0, "a non-negative integer");
      t.unattributed = optional<uint64_t>(d, "unattributed", 0, "a non-negative integer");
      t.unattributed_ns = optional<uint64_t>(d, "unattributed_ns", 0, "a non-negative integer");
      if (YAML::Node k = d["unattributed_kernels"]) t.unattributed_kernels = kernels(k);
      if (YAML::Node e = d["events"]) t.events = events(e);
      m.device_timing = t;
    }
    if (YAML::Node p = n["merged_from"]) {
      if (!p.IsSequence()) fail(p, "expected merged_from to be a list of processes");
      for (const auto& x : p) m.merged_from.push_back(process(x));
    }
    return m;
  }

  Trace trace(const YAML::Node& root) const {
    if (!root.IsMap()) fail(root, "expected a bbshim trace (a map with version, meta, ops)");
    Trace t;
    YAML::Node v = require(root, "version");
    t.version = scalar<int>(v, "an integer");
    if (t.version != kFormatVersion)
      fail(v, "unsupported trace version " + std::to_string(t.version) + " (this build reads " +
                  std::to_string(kFormatVersion) + ")");
    t.meta = meta(root["meta"]);
    YAML::Node ops = require(root, "ops");
    if (!ops.IsSequence()) fail(ops, "expected 'ops' to be a list");
    for (const auto& e : ops) t.ops.push_back(entry(e));
    return t;
  }
};

}  // namespace

std::string to_yaml(const Trace& trace) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << trace.version;
  emit_meta(out, trace.meta);
  out << YAML::Key << "ops" << YAML::Value << YAML::BeginSeq;
  for (const auto& e : trace.ops) emit_entry(out, e);
  out << YAML::EndSeq;
  out << YAML::EndMap;
  std::string text = std::string("# bbshim trace; format: docs/trace-format.md\n") + out.c_str() + "\n";
  return text;
}

Trace parse_trace(const std::string& text, const std::string& source) {
  Reader reader(source);
  return reader.trace(reader.load(text));
}

Trace load_trace(const std::string& path) { return parse_trace(format::read_input_file(path), path); }

}  // namespace bb::trace
