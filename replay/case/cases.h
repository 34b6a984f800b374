// Which cases a replay runs: every traced signature of the selected ops, in every variant.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::replay {

inline const std::vector<std::string>& all_variants() {
  static const std::vector<std::string> v = {"traced", "noncontiguous", "special-values", "large-values",
                                             "empty",  "scalar",        "odd-size"};
  return v;
}

// --ops patterns, comma-separated. A pattern is a full overload name; "aten::" may be left out;
// `*` and `?` are wildcards. relu means aten::relu only (not leaky_relu, not relu_); add.* means every
// overload of add; *_backward means every backward op of the default overload.
class OpFilter {
 public:
  explicit OpFilter(const std::string& list = "");
  bool matches(const std::string& op) const;
  // Patterns that matched none of `ops`, for a warning.
  std::vector<std::string> unused(const std::vector<std::string>& ops) const;

 private:
  std::vector<std::string> patterns_;
};

struct Case {
  size_t entry;  // index into trace.ops
  std::string variant;
};

// Every selected entry in every variant that `applies` to it. The traced variant is always kept, so
// that every selected entry of the trace appears in the report (as skipped, when it cannot be rebuilt).
using VariantCheck = std::function<bool(const trace::TraceEntry&, const std::string& variant)>;
std::vector<Case> enumerate_cases(const trace::Trace& trace, const OpFilter& filter,
                                  const std::vector<std::string>& variants, const VariantCheck& applies = {});

}  // namespace bb::replay
