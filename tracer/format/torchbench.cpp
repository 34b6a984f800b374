#include "tracer/format/torchbench.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "tracer/format/op_name.h"
#include "tracer/format/trace_yaml.h"

namespace bb::trace {
namespace {

using trace::ArgKind;
using trace::ArgValue;
using trace::FormatError;
using trace::TensorMeta;

constexpr std::array<std::pair<const char*, const char*>, 13> kAbbrs{{
    {"bf16", "bfloat16"},
    {"f64", "float64"},
    {"f32", "float32"},
    {"f16", "float16"},
    {"c32", "complex32"},
    {"c64", "complex64"},
    {"c128", "complex128"},
    {"i8", "int8"},
    {"i16", "int16"},
    {"i32", "int32"},
    {"i64", "int64"},
    {"b8", "bool"},
    {"u8", "uint8"},
}};

// torch.<name> spellings the logs use besides dtypes.
const std::map<std::string, std::pair<ArgKind, std::string>>& torch_names() {
  static const std::map<std::string, std::pair<ArgKind, std::string>> names = {
      {"torch.strided", {ArgKind::Layout, "strided"}},
      {"torch.sparse_coo", {ArgKind::Layout, "sparse_coo"}},
      {"torch.sparse_csr", {ArgKind::Layout, "sparse_csr"}},
      {"torch.contiguous_format", {ArgKind::MemoryFormat, "contiguous_format"}},
      {"torch.preserve_format", {ArgKind::MemoryFormat, "preserve_format"}},
      {"torch.channels_last", {ArgKind::MemoryFormat, "channels_last"}},
      {"torch.channels_last_3d", {ArgKind::MemoryFormat, "channels_last_3d"}},
  };
  return names;
}

std::string dtype_from_token(const std::string& tok) {
  for (const auto& [abbr, name] : kAbbrs)
    if (tok == abbr) return name;
  if (tok.rfind("torch.", 0) == 0 && trace::is_dtype_name(tok.substr(6))) return tok.substr(6);
  return "";
}

std::string abbr_of(const std::string& dtype) {
  for (const auto& [abbr, name] : kAbbrs)
    if (dtype == name) return abbr;
  return "torch." + dtype;
}

// ------------------------------------------------------------------ values of the Python subset

struct Py {
  enum Kind { Int, Float, Bool, None, Str, Name, Tensor, List, Tuple, Dict, Opaque } kind = None;
  int col = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;                  // Str text; Name spelling
  std::vector<Py> items;          // List, Tuple, Dict values
  std::vector<std::string> keys;  // Dict keys
  TensorMeta tensor;
};

class LineParser {
 public:
  LineParser(const std::string& text, size_t start, const std::string& source, int line)
      : t_(text), p_(start), source_(source), line_(line) {}

  [[noreturn]] void fail(const std::string& message, size_t at) const {
    throw FormatError(source_, line_, static_cast<int>(at) + 1, message);
  }
  [[noreturn]] void fail(const std::string& message) const { fail(message, p_); }

  void skip_space() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\r')) ++p_;
  }
  bool peek(char c) {
    skip_space();
    return p_ < t_.size() && t_[p_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++p_;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++p_;
    return true;
  }
  bool at_end() {
    skip_space();
    return p_ >= t_.size();
  }
  size_t pos() const { return p_; }

  // A call count: digits only, any value a uint64_t holds (as the YAML trace's `count`).
  uint64_t count() {
    skip_space();
    const size_t start = p_;
    while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
    if (p_ == start) fail("expected a non-negative count", start);
    uint64_t v = 0;
    if (std::from_chars(t_.data() + start, t_.data() + p_, v).ec == std::errc::result_out_of_range)
      fail("count '" + t_.substr(start, p_ - start) + "' does not fit in 64 bits", start);
    return v;
  }

  Py value() {
    skip_space();
    if (p_ >= t_.size()) fail("unexpected end of line");
    // Each value inside brackets is a level of recursion: 10,000 '[' overflowed the stack.
    if (depth_ == format::kMaxNesting)
      fail("nested deeper than the limit of " + std::to_string(format::kMaxNesting) + " levels");
    struct Level {
      int& depth;
      explicit Level(int& d) : depth(++d) {}
      ~Level() { --depth; }
    } level(depth_);
    const char c = t_[p_];
    if (c == '(') return sequence(Py::Tuple, '(', ')');
    if (c == '[') return sequence(Py::List, '[', ']');
    if (c == '{') return dict();
    if (c == '\'' || c == '"') return string();
    if (c == '<') return opaque();
    if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) return signed_number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return named();
    fail(std::string("unexpected '") + c + "'");
  }

 private:
  Py make(Py::Kind k) {
    Py v;
    v.kind = k;
    v.col = static_cast<int>(p_) + 1;
    return v;
  }

  // At most `limit` items, `what` naming them in the error.
  Py sequence(Py::Kind kind, char open, char close, size_t limit = SIZE_MAX, const char* what = "") {
    Py v = make(kind);
    expect(open);
    bool comma = false;
    while (!accept(close)) {
      if (!v.items.empty() && !comma) fail(std::string("expected ',' or '") + close + "'");
      if (v.items.size() == limit)
        fail(std::string("more than ") + std::to_string(limit) + " " + what + "; the limit is " +
             std::to_string(limit));
      v.items.push_back(value());
      comma = accept(',');
    }
    if (kind == Py::Tuple && v.items.size() == 1 && !comma) return v.items[0];  // (x) is x
    return v;
  }

  Py dict() {
    Py v = make(Py::Dict);
    expect('{');
    while (!accept('}')) {
      if (!v.items.empty()) expect(',');
      if (accept('}')) break;
      Py key = value();
      if (key.kind != Py::Str) fail("expected a string key", static_cast<size_t>(key.col - 1));
      expect(':');
      v.keys.push_back(key.s);
      v.items.push_back(value());
    }
    return v;
  }

  // The escapes Python's repr writes (and py_str below): \\ \' \" \n \r \t \xhh.
  Py string() {
    Py v = make(Py::Str);
    const char quote = t_[p_++];
    while (p_ < t_.size() && t_[p_] != quote) {
      if (t_[p_] != '\\' || p_ + 1 >= t_.size()) {
        v.s += t_[p_++];
        continue;
      }
      const size_t at = p_;
      const char c = t_[p_ + 1];
      p_ += 2;
      if (c == '\\' || c == '\'' || c == '"') {
        v.s += c;
      } else if (c == 'n' || c == 'r' || c == 't') {
        v.s += c == 'n' ? '\n' : c == 'r' ? '\r' : '\t';
      } else if (c == 'x' && p_ + 2 <= t_.size() && std::isxdigit(static_cast<unsigned char>(t_[p_])) &&
                 std::isxdigit(static_cast<unsigned char>(t_[p_ + 1]))) {
        const unsigned code = std::stoul(t_.substr(p_, 2), nullptr, 16);  // a code point: UTF-8 above 0x7f
        if (code < 0x80) {
          v.s += static_cast<char>(code);
        } else {
          v.s += static_cast<char>(0xc0 | (code >> 6));
          v.s += static_cast<char>(0x80 | (code & 0x3f));
        }
        p_ += 2;
      } else {
        fail(std::string("unsupported escape '\\") + c + "'", at);
      }
    }
    if (p_ >= t_.size()) fail("unterminated string", static_cast<size_t>(v.col - 1));
    ++p_;
    return v;
  }

  // A Python object's default repr, e.g. <torch.ScriptObject object at 0x55c2...>: kept as text.
  Py opaque() {
    Py v = make(Py::Opaque);
    int depth = 0;
    do {
      if (t_[p_] == '<') ++depth;
      if (t_[p_] == '>') --depth;
      v.s += t_[p_++];
    } while (depth > 0 && p_ < t_.size());
    if (depth > 0) fail("unterminated <...>", static_cast<size_t>(v.col - 1));
    return v;
  }

  Py signed_number() {
    const size_t start = p_;
    const bool negative = t_[p_] == '-';
    if (t_[p_] == '-' || t_[p_] == '+') ++p_;
    if (p_ < t_.size() && std::isalpha(static_cast<unsigned char>(t_[p_]))) {  // -inf
      Py v = named();
      if (v.kind != Py::Float) fail("expected a number", start);
      if (negative) v.f = -v.f;
      v.col = static_cast<int>(start) + 1;
      return v;
    }
    p_ = start;
    return number();
  }

  Py number() {
    Py v = make(Py::Int);
    const size_t start = p_;
    if (p_ < t_.size() && (t_[p_] == '-' || t_[p_] == '+')) ++p_;
    bool is_float = false;
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++p_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
        ++p_;
        if ((c == 'e' || c == 'E') && p_ < t_.size() && (t_[p_] == '-' || t_[p_] == '+')) ++p_;
      } else {
        break;
      }
    }
    const std::string text = t_.substr(start, p_ - start);
    if (text.find_first_of("0123456789") == std::string::npos) fail("expected a number", start);
    const char* b = text.data() + (text[0] == '+');
    const char* e = text.data() + text.size();
    // from_chars leaves the value untouched (0) when it is out of range: that must not read as 0.
    if (is_float) {
      v.kind = Py::Float;
      auto [end, ec] = std::from_chars(b, e, v.f);
      if (end != e) fail("bad number '" + text + "'", start);
      if (ec == std::errc::result_out_of_range) fail("number '" + text + "' is out of range", start);
    } else {
      auto [end, ec] = std::from_chars(b, e, v.i);
      if (end != e) fail("bad integer '" + text + "'", start);
      if (ec == std::errc::result_out_of_range) fail("integer '" + text + "' does not fit in 64 bits", start);
    }
    return v;
  }

  std::string identifier() {
    const size_t start = p_;
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_' || t_[p_] == '.')) ++p_;
    return t_.substr(start, p_ - start);
  }

  Py named() {
    Py v = make(Py::Name);
    v.s = identifier();
    if (v.s == "T" && peek('(')) return tensor(v.col, false);
    if (v.s == "ST" && peek('(')) return tensor(v.col, true);
    if (v.s == "True" || v.s == "False") {
      v.kind = Py::Bool;
      v.b = v.s == "True";
    } else if (v.s == "None") {
      v.kind = Py::None;
    } else if (v.s == "inf" || v.s == "nan") {
      v.kind = Py::Float;
      v.f = v.s == "inf" ? INFINITY : NAN;
    }
    return v;
  }

  std::string dtype() {
    skip_space();
    const size_t start = p_;
    std::string tok = identifier();
    std::string d = dtype_from_token(tok);
    if (d.empty()) fail("unknown dtype '" + tok + "'", start);
    return d;
  }

  // T([shape], dtype[, stride=(...)]) and ST([shape], dtype, layout, coalesced[, nnz])
  Py tensor(int col, bool sparse) {
    Py v;
    v.kind = Py::Tensor;
    v.col = col;
    expect('(');
    // A bounded list: each size costs a Py here, and a 2-million-dimension shape took gigabytes.
    if (!peek('[')) fail("expected the shape as a list");
    Py shape = sequence(Py::List, '[', ']', format::kMaxRank, "dimensions");
    for (const Py& s : shape.items) {
      if (s.kind != Py::Int) fail("expected a size", static_cast<size_t>(s.col - 1));
      if (s.i < 0) fail("expected a size >= 0, got " + std::to_string(s.i), static_cast<size_t>(s.col - 1));
      v.tensor.shape.push_back(s.i);
    }
    // Before contiguous_strides multiplies the sizes; again below with the strides.
    if (const char* why = trace::unaddressable(v.tensor)) fail(why, static_cast<size_t>(shape.col - 1));
    expect(',');
    v.tensor.dtype = dtype();
    v.tensor.device = "cuda";
    if (sparse) {
      expect(',');
      Py layout = value();
      auto it = torch_names().find(layout.s);
      if (it == torch_names().end() || it->second.first != ArgKind::Layout)
        fail("expected a layout such as torch.sparse_coo", static_cast<size_t>(layout.col - 1));
      v.tensor.layout = it->second.second;
      while (accept(',')) value();  // is_coalesced, nnz: not recorded
    } else {
      v.tensor.stride = trace::contiguous_strides(v.tensor.shape);
      if (accept(',')) {
        skip_space();
        const size_t at = p_;
        if (identifier() != "stride") fail("expected stride=(...)", at);
        expect('=');
        Py stride = peek('(')   ? sequence(Py::Tuple, '(', ')', format::kMaxRank, "strides")
                    : peek('[') ? sequence(Py::List, '[', ']', format::kMaxRank, "strides")
                                : value();
        if (stride.kind != Py::Tuple && stride.kind != Py::List) stride.items = {stride};
        if (stride.items.size() != v.tensor.shape.size())
          fail("stride has " + std::to_string(stride.items.size()) + " entries, shape " +
                   std::to_string(v.tensor.shape.size()),
               static_cast<size_t>(stride.col - 1));
        v.tensor.stride.clear();
        for (const Py& s : stride.items) {
          if (s.kind != Py::Int) fail("expected an integer stride", static_cast<size_t>(s.col - 1));
          // PyTorch makes no tensor with a negative stride (empty_strided rejects one).
          if (s.i < 0) fail("expected a stride >= 0, got " + std::to_string(s.i), static_cast<size_t>(s.col - 1));
          v.tensor.stride.push_back(s.i);
        }
      }
    }
    if (const char* why = trace::unaddressable(v.tensor)) fail(why, static_cast<size_t>(shape.col - 1));
    expect(')');
    return v;
  }

  const std::string& t_;
  size_t p_;
  int depth_ = 0;  // values being parsed, one inside the other
  const std::string& source_;
  int line_;
};

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

// ------------------------------------------------------------------ writing

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

trace::Trace load_any_trace(const std::string& path) {
  const std::string text = format::read_input_file(path);
  return looks_like_torchbench(text) ? parse_torchbench(text, path) : trace::parse_trace(text, path);
}

}  // namespace bb::trace
