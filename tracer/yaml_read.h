// Reading YAML with errors that say where: every failure is a FormatError at the offending node
// ("file:line:column: expected ..."). Shared by the trace reader and the policy parser.
#pragma once

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tracer/trace_yaml.h"

namespace bb::yaml {

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& message) const {
    auto mark = at.Mark();
    throw trace::FormatError(source_, mark.line + 1, mark.column + 1, message);
  }

  YAML::Node require(const YAML::Node& map, const char* key) const {
    YAML::Node n = map[key];
    if (!n) fail(map, std::string("missing key '") + key + "'");
    return n;
  }

  template <class T>
  T scalar(const YAML::Node& n, const char* expected) const {
    if (!n.IsScalar()) fail(n, std::string("expected ") + expected);
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, std::string("expected ") + expected + ", got '" + n.Scalar() + "'");
    }
  }

  template <class T>
  std::vector<T> list(const YAML::Node& n, const char* expected) const {
    if (!n.IsSequence()) fail(n, std::string("expected a list of ") + expected);
    std::vector<T> out;
    for (const auto& x : n) out.push_back(scalar<T>(x, expected));
    return out;
  }

  template <class T>
  T optional(const YAML::Node& map, const char* key, T fallback, const char* expected) const {
    YAML::Node n = map[key];
    return n ? scalar<T>(n, expected) : fallback;
  }

  // Fails on a key of `map` not in `allowed` (typos must not be silently ignored).
  void only_keys(const YAML::Node& map, std::initializer_list<const char*> allowed) const {
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      bool ok = false;
      std::string names;
      for (const char* a : allowed) {
        ok |= key == a;
        names += std::string(names.empty() ? "" : ", ") + a;
      }
      if (!ok) fail(kv.first, "unknown key '" + key + "' (expected " + names + ")");
    }
  }

  YAML::Node load(const std::string& text) const {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      throw trace::FormatError(source_, e.mark.line + 1, e.mark.column + 1, e.msg);
    }
    no_duplicate_keys(root);
    return root;
  }

  // The file named by source().
  YAML::Node load_file() const {
    std::ifstream in(source_);
    if (!in) throw trace::FormatError(source_, 0, 0, "cannot open file");
    std::stringstream ss;
    ss << in.rdbuf();
    return load(ss.str());
  }

  // A path written in this file: relative ones are relative to the file's folder.
  std::string path(const YAML::Node& n, const char* expected) const {
    std::string p = scalar<std::string>(n, expected);
    if (p.empty() || p[0] == '/') return p;
    auto slash = source_.rfind('/');
    return slash == std::string::npos ? p : source_.substr(0, slash + 1) + p;
  }

 private:
  // yaml-cpp keeps both entries of a repeated key and lookups find the first: the second would be
  // silently ignored.
  void no_duplicate_keys(const YAML::Node& n) const {
    if (n.IsSequence())
      for (const auto& x : n) no_duplicate_keys(x);
    if (!n.IsMap()) return;
    std::set<std::string> seen;
    for (const auto& kv : n) {
      if (kv.first.IsScalar() && !seen.insert(kv.first.Scalar()).second)
        fail(kv.first, "duplicate key '" + kv.first.Scalar() + "'");
      no_duplicate_keys(kv.second);
    }
  }

  std::string source_;
};

}  // namespace bb::yaml
