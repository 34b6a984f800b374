// The subset of Python literal syntax TorchBench operator-input logs are written in, parsed one line at
// a time (never evaluated): numbers, strings with repr's escapes, True/False/None, names, tuples, lists,
// dicts, <object reprs> and the logs' tensors T([shape], dtype[, stride=(...)]) / ST(...). Errors throw
// trace::FormatError at the line and column. Internal to tracer/format (torchbench_read.cpp).
#pragma once

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tracer/format/input.h"
#include "tracer/format/torchbench_tokens.h"
#include "tracer/format/trace_model.h"
#include "tracer/format/trace_yaml.h"

namespace bb::trace::torchbench {

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

}  // namespace bb::trace::torchbench
