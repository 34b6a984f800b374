#include "policy/policy.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "backends/loader.h"
#include "tracer/format/op_name.h"
#include "tracer/names.h"
#include "tracer/format/yaml_read.h"

namespace bb::policy {
namespace {

Mode parse_mode(const yaml::Reader& r, const YAML::Node& n) {
  auto s = r.scalar<std::string>(n, "route, shadow or off");
  if (s == "route") return Mode::Route;
  if (s == "shadow") return Mode::Shadow;
  if (s == "off") return Mode::Off;
  r.fail(n, "mode '" + s + "' is not route, shadow or off");
}

OnError parse_on_error(const yaml::Reader& r, const YAML::Node& n) {
  auto s = r.scalar<std::string>(n, "fallback or raise");
  if (s == "fallback") return OnError::Fallback;
  if (s == "raise") return OnError::Raise;
  r.fail(n, "on_error '" + s + "' is not fallback or raise");
}

c10::ScalarType parse_dtype(const yaml::Reader& r, const YAML::Node& n) {
  auto s = r.scalar<std::string>(n, "a dtype name such as float32");
  auto t = names::dtype_from(s);
  if (!t) r.fail(n, "unknown dtype '" + s + "' (use torch's names: float32, bfloat16, int64, ...)");
  return *t;
}

c10::DeviceType parse_device(const yaml::Reader& r, const YAML::Node& n) {
  auto s = r.scalar<std::string>(n, "a device type such as cpu or cuda");
  try {
    c10::Device d(s);
    if (d.has_index()) r.fail(n, "device '" + s + "': give a device type (cpu, cuda), not an index");
    return d.type();
  } catch (const c10::Error&) {
    r.fail(n, "unknown device type '" + s + "'");
  }
}

std::pair<int64_t, int64_t> parse_range(const yaml::Reader& r, const YAML::Node& n, const char* what) {
  auto v = r.list<double>(n, "numbers");  // doubles so that 1e9 reads
  // Written so that NaN fails too; 2^63 and above (.inf) do not convert to int64_t.
  constexpr double kLimit = 9223372036854775808.0;  // 2^63
  if (v.size() != 2 || !(v[0] >= 0 && v[0] <= v[1] && v[1] < kLimit))
    r.fail(n, std::string(what) + " must be [min, max] with 0 <= min <= max < 2^63");
  return {static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1])};
}

Condition parse_when(const yaml::Reader& r, const YAML::Node& n) {
  if (!n.IsMap()) r.fail(n, "expected 'when' to be a map of conditions");
  r.only_keys(n, {"device", "dtype", "contiguous", "rank", "numel"});
  Condition c;
  if (YAML::Node d = n["device"]) {
    if (!d.IsSequence()) r.fail(d, "expected a list of device types, e.g. [cpu, cuda]");
    for (const auto& x : d) c.devices.push_back(parse_device(r, x));
  }
  if (YAML::Node d = n["dtype"]) {
    if (!d.IsSequence()) r.fail(d, "expected a list of dtypes, e.g. [float32, bfloat16]");
    for (const auto& x : d) c.dtypes.push_back(parse_dtype(r, x));
  }
  if (YAML::Node x = n["contiguous"]) c.contiguous = r.scalar<bool>(x, "true or false");
  if (YAML::Node x = n["rank"]) c.rank = parse_range(r, x, "rank");
  if (YAML::Node x = n["numel"]) c.numel = parse_range(r, x, "numel");
  return c;
}

void parse_tolerance(const yaml::Reader& r, const YAML::Node& n, std::map<c10::ScalarType, verify::Tolerance>& out) {
  if (!n.IsMap()) r.fail(n, "expected 'tolerance' to map dtypes to {rtol, atol}");
  for (const auto& kv : n) {
    c10::ScalarType t = parse_dtype(r, kv.first);
    if (!kv.second.IsMap()) r.fail(kv.second, "expected {rtol: ..., atol: ...}");
    r.only_keys(kv.second, {"rtol", "atol"});
    verify::Tolerance tol{r.scalar<double>(r.require(kv.second, "rtol"), "a number"),
                          r.scalar<double>(r.require(kv.second, "atol"), "a number")};
    if (tol.rtol < 0 || tol.atol < 0) r.fail(kv.second, "tolerances must not be negative");
    out[t] = tol;
  }
}

// An op name of allow_aten: aten::exp (every overload), aten::add.Tensor, or without "aten::".
std::string parse_allowed_op(const yaml::Reader& r, const YAML::Node& n) {
  std::string op = r.scalar<std::string>(n, "an op name such as aten::exp or aten::add.Tensor");
  if (op.find("::") == std::string::npos) op = "aten::" + op;
  auto [name, overload] = trace::split_op(op);
  if (overload == "default") overload.clear(), op = name;
  auto& d = c10::Dispatcher::singleton();
  if (d.findSchema({name, overload})) return op;
  if (overload.empty())
    for (const auto& known : d.getAllOpNames())
      if (known.name == name) return op;
  r.fail(n, "allow_aten: unknown op '" + op + "' (no such op or overload in this torch)");
}

// allow_aten: all | none | [op, ...]
backends::AtenAllowance parse_allow_aten(const yaml::Reader& r, const YAML::Node& n) {
  backends::AtenAllowance a;
  if (n.IsScalar()) {
    const auto s = r.scalar<std::string>(n, "all, none or a list of op names");
    if (s == "all") a.all = true;
    else if (s != "none")
      r.fail(n, "allow_aten '" + s + "' is not all, none or a list of op names");
    return a;
  }
  if (!n.IsSequence()) r.fail(n, "expected allow_aten to be all, none or a list of op names");
  for (const auto& x : n) a.ops.push_back(parse_allowed_op(r, x));
  return a;
}

// mode, on_error, tolerance (and `when` for op entries) on top of `base`.
OpPolicy parse_entry(const yaml::Reader& r, const YAML::Node& n, const OpPolicy& base, bool with_when) {
  OpPolicy p = base;
  if (n.IsNull()) return p;
  if (!n.IsMap()) r.fail(n, "expected a map (mode, when, on_error, tolerance, strict_strides, allow_aten)");
  if (with_when) {
    r.only_keys(n, {"mode", "when", "on_error", "tolerance", "strict_strides", "allow_aten"});
  } else {
    r.only_keys(n, {"mode", "on_error", "tolerance", "strict_strides", "allow_aten"});
  }
  if (YAML::Node x = n["mode"]) p.mode = parse_mode(r, x);
  if (YAML::Node x = n["on_error"]) p.on_error = parse_on_error(r, x);
  if (YAML::Node x = n["tolerance"]) parse_tolerance(r, x, p.tolerance);
  if (YAML::Node x = n["strict_strides"]) p.strict_strides = r.scalar<bool>(x, "true or false");
  if (YAML::Node x = n["when"]; x && with_when) p.when = parse_when(r, x);
  if (YAML::Node x = n["allow_aten"]) p.allow_aten = parse_allow_aten(r, x);
  return p;
}

template <class Pred>
bool all_tensors(c10::ArrayRef<c10::IValue> args, Pred pred) {
  for (const auto& a : args) {
    if (a.isTensor()) {
      if (a.toTensor().defined() && !pred(a.toTensor())) return false;
    } else if (a.isTensorList() || a.isList()) {
      for (const auto& x : a.toListRef())
        if (x.isTensor() && x.toTensor().defined() && !pred(x.toTensor())) return false;
    }
  }
  return true;
}

const at::Tensor* first_tensor(c10::ArrayRef<c10::IValue> args) {
  for (const auto& a : args)
    if (a.isTensor() && a.toTensor().defined()) return &a.toTensor();
  return nullptr;
}

}  // namespace

const OpPolicy* Policy::find(const std::string& op) const {
  for (const auto& p : ops)
    if (p.op == op) return &p;
  return nullptr;
}

namespace {

Policy parse_root(const yaml::Reader& r, const YAML::Node& root) {
  const std::string& source = r.source();
  if (!root.IsMap()) r.fail(root, "expected a policy (a map with version and ops)");
  r.only_keys(root, {"version", "backend", "default", "ops"});
  YAML::Node v = r.require(root, "version");
  if (r.scalar<int>(v, "an integer") != 1) r.fail(v, "unsupported policy version (this build reads 1)");
  Policy p;
  p.source = source;
  if (YAML::Node b = root["backend"]) p.backend = r.path(b, "a folder");
  if (YAML::Node d = root["default"]) p.defaults = parse_entry(r, d, p.defaults, false);
  YAML::Node ops = r.require(root, "ops");
  if (!ops.IsMap()) r.fail(ops, "expected 'ops' to map op names (aten::add.Tensor) to their settings");
  for (const auto& kv : ops) {
    const std::string op = r.scalar<std::string>(kv.first, "an op name such as aten::relu");
    std::optional<c10::OperatorHandle> handle;
    std::string obstacle = backends::routing_obstacle(op, &handle);
    if (!obstacle.empty()) r.fail(kv.first, op + " " + obstacle);
    OpPolicy entry = parse_entry(r, kv.second, p.defaults, true);
    entry.op = op;
    entry.line = kv.first.Mark().line + 1;
    p.ops.push_back(std::move(entry));
  }
  return p;
}

}  // namespace

Policy parse_policy(const std::string& text, const std::string& source) {
  yaml::Reader r(source);
  return parse_root(r, r.load(text));
}

Policy load_policy(const std::string& path) {
  yaml::Reader r(path);
  return parse_root(r, r.load_file());
}

Policy load_policy_section(const std::string& file, const std::string& key) {
  yaml::Reader r(file);
  YAML::Node root = r.load_file();
  return parse_root(r, r.require(root, key.c_str()));
}

const char* unmet(const Condition& c, c10::ArrayRef<c10::IValue> args) {
  if (!c.devices.empty()) {
    auto on_listed = [&c](const at::Tensor& t) {
      return std::find(c.devices.begin(), c.devices.end(), t.device().type()) != c.devices.end();
    };
    if (!all_tensors(args, on_listed)) return "device";
  }
  if (c.contiguous) {
    const bool all = all_tensors(args, [](const at::Tensor& t) { return t.is_contiguous(); });
    if (all != *c.contiguous) return "contiguity";
  }
  if (c.dtypes.empty() && !c.rank && !c.numel) return nullptr;
  const at::Tensor* t = first_tensor(args);
  if (!t) return "no tensor argument";
  if (!c.dtypes.empty() && std::find(c.dtypes.begin(), c.dtypes.end(), t->scalar_type()) == c.dtypes.end())
    return "dtype";
  if (c.rank && (t->dim() < c.rank->first || t->dim() > c.rank->second)) return "rank";
  if (c.numel && (t->numel() < c.numel->first || t->numel() > c.numel->second)) return "numel";
  return nullptr;
}

const backends::AtenAllowance& allowance_for(const Policy& p, const std::string& op) {
  const OpPolicy* entry = p.find(op);
  return entry ? entry->allow_aten : p.defaults.allow_aten;
}

verify::Tolerance tolerance_for(const Policy& p, const OpPolicy& op, c10::ScalarType t) {
  if (auto it = op.tolerance.find(t); it != op.tolerance.end()) return it->second;
  if (auto it = p.defaults.tolerance.find(t); it != p.defaults.tolerance.end()) return it->second;
  return verify::default_tolerance(t);
}

const char* to_string(Mode m) {
  switch (m) {
    case Mode::Route: return "route";
    case Mode::Shadow: return "shadow";
    default: return "off";
  }
}

}  // namespace bb::policy
