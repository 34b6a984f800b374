// Reading YAML with errors that say where: every failure is a format::InputError at the offending node
// ("file:line:column: expected ..."). Shared by the trace reader, the policy parser and the preload's
// settings file.
#pragma once

#include <yaml-cpp/depthguard.h>  // YAML::DeepRecursion, not in yaml.h (0.7 and 0.8 ship it)
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tracer/format/input.h"

namespace bb::yaml {

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& message) const {
    auto mark = at.Mark();
    throw format::InputError(source_, mark.line + 1, mark.column + 1, message);
  }

  // `map` may be any node: yaml-cpp's operator[] throws its own exception on a scalar.
  YAML::Node require(const YAML::Node& map, const char* key) const {
    expect_map(map, key);
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
    expect_map(map, key);
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
    } catch (const YAML::DeepRecursion& e) {
      // yaml-cpp's own guard (about 500 levels) says "bad file" at a useless position; this says which
      // limit and finds the bracket that passed ours.
      const auto [line, column] = deep_bracket(text);
      throw format::InputError(source_, line ? line : e.mark.line + 1, line ? column : e.mark.column + 1,
                               nested_too_deep());
    } catch (const YAML::ParserException& e) {
      throw format::InputError(source_, e.mark.line + 1, e.mark.column + 1, e.msg);
    }
    // Aliases share nodes: a walk of the tree visits an aliased subtree once per alias, and ten lines
    // of nested aliases ("billion laughs") are 10^20 visits. Every reader walks the tree, so the walk
    // here is bounded by what the text could hold without aliases (a value takes at least a byte or two).
    size_t budget = 2 * text.size() + 64;
    check_tree(root, 1, budget);
    return root;
  }

  // The file named by source().
  YAML::Node load_file() const { return load(format::read_input_file(source_)); }

  // A path written in this file: relative ones are relative to the file's folder.
  std::string path(const YAML::Node& n, const char* expected) const {
    std::string p = scalar<std::string>(n, expected);
    if (p.empty() || p[0] == '/') return p;
    auto slash = source_.rfind('/');
    return slash == std::string::npos ? p : source_.substr(0, slash + 1) + p;
  }

 private:
  // A missing or empty map (an undefined or null node) is left to the caller: "missing key", or the fallback.
  void expect_map(const YAML::Node& map, const char* key) const {
    if (map && !map.IsMap() && !map.IsNull()) fail(map, std::string("expected a map with the key '") + key + "'");
  }

  static std::string nested_too_deep() {
    return "nested deeper than the limit of " + std::to_string(format::kMaxNesting) + " levels";
  }

  // Where flow brackets first nest deeper than format::kMaxNesting (1-based line and column), or {0, 0}. Only
  // locates an error yaml-cpp already found, so it skips quoted text and comments without parsing more.
  static std::pair<int, int> deep_bracket(const std::string& text) {
    int depth = 0, line = 1, column = 0;
    char quote = 0;
    bool comment = false;
    for (char c : text) {
      ++column;
      if (c == '\n') {
        ++line;
        column = 0;
        comment = false;
      } else if (comment) {
      } else if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '#') {
        comment = true;
      } else if (c == '[' || c == '{') {
        if (++depth > format::kMaxNesting) return {line, column};
      } else if ((c == ']' || c == '}') && depth > 0) {
        --depth;
      }
    }
    return {0, 0};
  }

  // yaml-cpp keeps both entries of a repeated key and lookups find the first: the second would be
  // silently ignored. The readers recurse into what they read, so nesting is limited too, and so is the
  // number of values aliases expand to (`budget`, counted down).
  void check_tree(const YAML::Node& n, int depth, size_t& budget) const {
    if (depth > format::kMaxNesting) fail(n, nested_too_deep());
    if (budget-- == 0)
      fail(n,
           "anchors and aliases expand to more values than the file's size allows (an alias bomb?); "
           "write the values out instead");
    if (n.IsSequence())
      for (const auto& x : n) check_tree(x, depth + 1, budget);
    if (!n.IsMap()) return;
    std::set<std::string> seen;
    for (const auto& kv : n) {
      if (kv.first.IsScalar() && !seen.insert(kv.first.Scalar()).second)
        fail(kv.first, "duplicate key '" + kv.first.Scalar() + "'");
      check_tree(kv.second, depth + 1, budget);
    }
  }

  std::string source_;
};

}  // namespace bb::yaml
