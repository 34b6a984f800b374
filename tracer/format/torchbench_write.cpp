// Writing a trace as a TorchBench operator-input log (torchbench.h).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

#include "tracer/format/op_name.h"
#include "tracer/format/torchbench.h"
#include "tracer/format/torchbench_tokens.h"

namespace bb::trace {
namespace {

using torchbench::abbr_of;
using trace::ArgKind;
using trace::ArgValue;
using trace::TensorMeta;

std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::string s(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string py_ints(const std::vector<int64_t>& v, char open, char close) {
  std::string s(1, open);
  for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  if (open == '(' && v.size() == 1) s += ",";
  return s + close;
}

// Control characters escaped as Python's repr does, so that no string can start a line of its own.
std::string py_str(const std::string& v) {
  std::string s = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') {
      s += std::string("\\") + c;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      s += c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      s += buf;
    } else {
      s += c;
    }
  }
  return s + "'";
}

bool has_control(const std::string& v) {
  return std::any_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Returns false when the value cannot be written in this format.
bool py_tensor(const std::optional<TensorMeta>& t, std::string& out) {
  if (!t) {
    out += "None";
    return true;
  }
  // No storage offset either: PyTorch's loader makes every tensor at offset 0, so written without it
  // the entry would describe another input.
  if (t->symbolic || t->layout != "strided" || t->offset != 0) return false;
  out += "T(" + py_ints(t->shape, '[', ']') + ", " + abbr_of(t->dtype);
  if (t->stride != trace::contiguous_strides(t->shape)) out += ", stride=" + py_ints(t->stride, '(', ')');
  out += ")";
  return true;
}

bool py_value(const ArgValue& a, std::string& out) {
  switch (a.kind) {
    case ArgKind::None: out += "None"; return true;
    case ArgKind::Tensor: return py_tensor(a.tensors[0], out);
    case ArgKind::Int: out += std::to_string(a.i); return true;
    case ArgKind::Float: out += py_float(a.f); return true;
    case ArgKind::Bool: out += a.b ? "True" : "False"; return true;
    case ArgKind::String: out += py_str(a.text); return true;
    case ArgKind::Device: out += py_str(a.text.substr(0, a.text.find(':'))); return true;
    case ArgKind::ScalarType: out += abbr_of(a.text); return true;
    case ArgKind::Layout:
    case ArgKind::MemoryFormat: out += "torch." + a.text; return true;
    case ArgKind::IntList: out += py_ints(a.ints, '[', ']'); return true;
    case ArgKind::FloatList:
    case ArgKind::BoolList: {
      out += "[";
      const size_t n = a.kind == ArgKind::FloatList ? a.floats.size() : a.bools.size();
      for (size_t k = 0; k < n; ++k)
        out += std::string(k ? ", " : "") + (a.kind == ArgKind::FloatList ? py_float(a.floats[k])
                                             : a.bools[k]                 ? "True"
                                                                          : "False");
      out += "]";
      return true;
    }
    case ArgKind::TensorList:
    case ArgKind::OptTensorList:
      out += "[";
      for (size_t k = 0; k < a.tensors.size(); ++k) {
        if (k) out += ", ";
        if (!py_tensor(a.tensors[k], out)) return false;
      }
      out += "]";
      return true;
    case ArgKind::Other:  // an object repr read from a log goes back as it came
      if (a.text.size() < 2 || a.text.front() != '<' || a.text.back() != '>' || has_control(a.text)) return false;
      out += a.text;
      return true;
    default: return false;  // complex, generators, symbolic values: no spelling in this format
  }
}

bool py_call(const trace::TraceEntry& e, std::string& out) {
  std::string positional, keywords;
  size_t npos = 0;
  for (const ArgValue& a : e.args) {
    std::string v;
    if (!py_value(a, v)) return false;
    if (a.kwarg_only) {
      keywords += (keywords.empty() ? "" : ", ") + py_str(a.name) + ": " + v;
    } else {
      positional += (npos++ ? ", " : "") + v;
    }
  }
  out += "cnt: " + std::to_string(e.count) + ", ((" + positional + (npos == 1 ? "," : "") + "), {" + keywords + "})\n";
  return true;
}

std::string dotted(const std::string& op) {
  auto [base, overload] = split_op(op);
  if (const auto colon = base.find("::"); colon != std::string::npos) base.replace(colon, 2, ".");
  return base + "." + (overload.empty() ? "default" : overload);
}
}  // namespace

TorchBenchText to_torchbench(const trace::Trace& trace) {
  std::map<std::string, std::string> by_op;  // sorted by op, like PyTorch's logger
  TorchBenchText out;
  for (const auto& e : trace.ops) {
    std::string line;
    if (has_control(e.op) || !py_call(e, line)) {  // an op name is not quoted: a newline would start a line
      ++out.skipped;
      continue;
    }
    by_op[dotted(e.op)] += line;
  }
  for (const auto& [op, lines] : by_op) out.text += "Operator: " + op + "\n" + lines;
  return out;
}

}  // namespace bb::trace
