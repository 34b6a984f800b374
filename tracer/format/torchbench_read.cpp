// Reading TorchBench operator-input logs (torchbench.h): a parser for the subset of Python literal
// syntax they use, never an evaluation of the text.
#include "tracer/format/torchbench.h"

#include <map>
#include <sstream>

#include "tracer/format/op_name.h"
#include "tracer/format/py_literal.h"
#include "tracer/format/torchbench_tokens.h"
#include "tracer/format/trace_yaml.h"

namespace bb::trace {
namespace {

using torchbench::dtype_from_token;
using torchbench::LineParser;
using torchbench::Py;
using torchbench::torch_names;
using trace::ArgKind;
using trace::ArgValue;
using trace::FormatError;
using trace::TensorMeta;

// ------------------------------------------------------------------ values -> trace arguments

class Converter {
 public:
  explicit Converter(const LineParser& p) : p_(p) {}

  ArgValue arg(const Py& v, const std::string& name, bool kwarg_only) const {
    ArgValue a;
    a.name = name;
    a.kwarg_only = kwarg_only;
    fill(v, a, name);
    return a;
  }

 private:
  [[noreturn]] void fail(const Py& at, const std::string& message) const {
    p_.fail(message, static_cast<size_t>(at.col - 1));
  }

  void fill(const Py& v, ArgValue& a, const std::string& name) const {
    switch (v.kind) {
      case Py::Int: a.kind = ArgKind::Int, a.i = v.i; return;
      case Py::Float: a.kind = ArgKind::Float, a.f = v.f; return;
      case Py::Bool: a.kind = ArgKind::Bool, a.b = v.b; return;
      case Py::None: a.kind = ArgKind::None; return;
      case Py::Tensor: a.kind = ArgKind::Tensor, a.tensors.push_back(v.tensor); return;
      case Py::Str:
        a.kind = name == "device" ? ArgKind::Device : ArgKind::String;
        a.text = v.s;
        return;
      case Py::Name: return fill_name(v, a);
      case Py::Opaque: a.kind = ArgKind::Other, a.text = v.s; return;
      case Py::List:
      case Py::Tuple: return fill_list(v, a);
      default: fail(v, "a dict is only expected as the keyword arguments");
    }
  }

  void fill_name(const Py& v, ArgValue& a) const {
    std::string dtype = dtype_from_token(v.s);
    if (!dtype.empty()) {
      a.kind = ArgKind::ScalarType;
      a.text = dtype;
      return;
    }
    auto it = torch_names().find(v.s);
    if (it == torch_names().end()) fail(v, "unknown name '" + v.s + "'");
    a.kind = it->second.first;
    a.text = it->second.second;
  }

  void fill_list(const Py& v, ArgValue& a) const {
    bool ints = true, bools = true, numbers = true, tensors = true, optional = false;
    for (const Py& x : v.items) {
      ints &= x.kind == Py::Int;
      bools &= x.kind == Py::Bool;
      numbers &= x.kind == Py::Int || x.kind == Py::Float;
      tensors &= x.kind == Py::Tensor || x.kind == Py::None;
      optional |= x.kind == Py::None;
    }
    if (ints) {
      a.kind = ArgKind::IntList;
      for (const Py& x : v.items) a.ints.push_back(x.i);
    } else if (bools) {
      a.kind = ArgKind::BoolList;
      for (const Py& x : v.items) a.bools.push_back(x.b);
    } else if (numbers) {
      a.kind = ArgKind::FloatList;
      for (const Py& x : v.items) a.floats.push_back(x.kind == Py::Int ? static_cast<double>(x.i) : x.f);
    } else if (tensors) {
      a.kind = optional ? ArgKind::OptTensorList : ArgKind::TensorList;
      for (const Py& x : v.items)
        a.tensors.push_back(x.kind == Py::None ? std::nullopt : std::optional<TensorMeta>(x.tensor));
    } else {
      fail(v, "a list mixing kinds of values this reader does not know");
    }
  }

  const LineParser& p_;
};

std::string op_name(const std::string& dotted, const FormatError& error_if_bad) {
  std::string name = dotted == "aten.sum.SymInt" ? "aten.sum.dim_IntList" : dotted;  // renamed overload
  const auto first = name.find('.'), last = name.rfind('.');
  if (first == std::string::npos || first == last || !plausible_op_name(name)) throw error_if_bad;
  const std::string ns = name.substr(0, first), base = name.substr(first + 1, last - first - 1),
                    overload = name.substr(last + 1);
  return join_op(ns + "::" + base, overload == "default" ? "" : overload);
}

// "cnt: N, ((args...), {kwargs})"
trace::TraceEntry parse_count_line(const std::string& line, int line_no, const std::string& source,
                                   const std::string& op) {
  LineParser p(line, 5, source, line_no);
  trace::TraceEntry e;
  e.op = op;
  e.count = p.count();
  p.expect(',');
  const size_t at = p.pos();
  Py call = p.value();
  if (call.kind != Py::Tuple || call.items.size() != 2 || call.items[1].kind != Py::Dict ||
      (call.items[0].kind != Py::Tuple && call.items[0].kind != Py::Tensor && call.items[0].kind != Py::List))
    p.fail("expected ((positional arguments), {keyword arguments})", at);
  if (!p.at_end()) p.fail("unexpected text after the arguments");
  Converter c(p);
  const Py& args = call.items[0];
  const std::vector<Py> positional = args.kind == Py::Tuple ? args.items : std::vector<Py>{args};
  for (size_t k = 0; k < positional.size(); ++k)
    e.args.push_back(c.arg(positional[k], "arg" + std::to_string(k), false));
  const Py& kwargs = call.items[1];
  for (size_t k = 0; k < kwargs.keys.size(); ++k) e.args.push_back(c.arg(kwargs.items[k], kwargs.keys[k], true));
  return e;
}

}  // namespace

bool looks_like_torchbench(const std::string& text) {
  size_t p = text.find_first_not_of(" \t\r\n");
  return p != std::string::npos && text.compare(p, 10, "Operator: ") == 0;
}

trace::Trace parse_torchbench(const std::string& text, const std::string& source) {
  trace::Trace t;
  t.meta.tool = "TorchBench operator-input log";
  t.meta.argv = {source};
  std::map<std::string, size_t> index;  // op + line text -> entry, to merge repeated lines
  std::istringstream in(text);
  std::string line, op;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line.rfind("Operator: ", 0) == 0) {
      std::string name = line.substr(10);
      while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
      op = op_name(name, FormatError(source, no, 11, "expected an op such as aten.add.Tensor, got '" + name + "'"));
      continue;
    }
    if (line.rfind("cnt: ", 0) != 0) throw FormatError(source, no, 1, "expected 'Operator: ...' or 'cnt: ...'");
    if (op.empty()) throw FormatError(source, no, 1, "'cnt:' before any 'Operator:' line");
    trace::TraceEntry e = parse_count_line(line, no, source, op);
    if (e.count > UINT64_MAX - t.meta.calls)
      throw FormatError(source, no, 6, "the counts add up to more than 64 bits hold");
    const std::string key = op + line.substr(line.find(','));
    auto [it, fresh] = index.emplace(key, t.ops.size());
    if (fresh) {
      t.ops.push_back(std::move(e));
    } else {
      t.ops[it->second].count += e.count;
    }
    t.meta.calls += e.count;
  }
  for (const auto& e : t.ops)
    for (const auto& a : e.args)
      if (!a.tensors.empty() && t.meta.devices.empty()) t.meta.devices.push_back({"cuda", ""});
  if (t.ops.empty() && op.empty()) throw FormatError(source, 1, 1, "expected 'Operator: ...'");
  return t;
}

trace::Trace load_any_trace(const std::string& path) {
  const std::string text = format::read_input_file(path);
  return looks_like_torchbench(text) ? parse_torchbench(text, path) : trace::parse_trace(text, path);
}

}  // namespace bb::trace
