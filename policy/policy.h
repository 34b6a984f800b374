// Routing policy (docs/policy.md): which ops go to the generated backend, under which conditions,
// in which mode, what to do on a kernel error, and the tolerances of shadow comparisons.
// One parser and one evaluator, used by the preload and by replay.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/op_kinds.h"
#include "policy/verify/tolerance.h"
#include "tracer/format/input.h"

namespace bb::policy {

enum class Mode { Route, Shadow, Off };
enum class OnError { Fallback, Raise };

struct Condition {
  std::vector<c10::DeviceType> devices;              // every tensor argument on one of these
  std::vector<c10::ScalarType> dtypes;               // the first tensor argument has one of these
  std::optional<bool> contiguous;                    // every tensor argument is (or, with false, any is not)
  std::optional<std::pair<int64_t, int64_t>> rank;   // first tensor argument's dim() in [min, max]
  std::optional<std::pair<int64_t, int64_t>> numel;  // first tensor argument's numel() in [min, max]
};

struct OpPolicy {
  std::string op;  // aten::add.Tensor
  Mode mode = Mode::Route;
  OnError on_error = OnError::Fallback;
  Condition when;
  std::map<c10::ScalarType, verify::Tolerance> tolerance;  // overrides of the defaults
  // A functional op's result with native's values and another layout (strides) fails instead of
  // passing with a note (in-place, out= and view results are always compared strictly).
  bool strict_strides = false;
  // ATen compute ops the kernel may call without being a native call (docs/policy.md): none by default.
  backends::AtenAllowance allow_aten;
  int line = 0;  // where it was written (0: implied)
};

struct Policy {
  std::string source;                  // file name, "" for the implied route-everything policy
  std::optional<std::string> backend;  // backend folder named by the policy, relative paths resolved
  OpPolicy defaults;                   // mode, on_error, tolerance for entries that do not say
  std::vector<OpPolicy> ops;
  const OpPolicy* find(const std::string& op) const;
};

// Parses and validates; a problem throws bb::format::InputError ("file:line:column: message").
// Ops are checked against the dispatcher: unknown ops, composite ops (never reached) and ops with
// their own BackendSelect kernel are errors.
Policy parse_policy(const std::string& text, const std::string& source);
Policy load_policy(const std::string& path);
// The policy written under `key` of a larger YAML file (BB_CONFIG's `policy:` section).
Policy load_policy_section(const std::string& file, const std::string& key);

// Why this call does not meet the condition, or nullptr when it does. Only reads metadata.
const char* unmet(const Condition& c, c10::ArrayRef<c10::IValue> args);

// The ATen compute ops a kernel for `op` may call under this policy: the op's entry's, else the
// default's (never null).
const backends::AtenAllowance& allowance_for(const Policy& p, const std::string& op);

// Shadow-comparison tolerance for a dtype: the op's, else the policy default's, else torch.testing's.
verify::Tolerance tolerance_for(const Policy& p, const OpPolicy& op, c10::ScalarType t);

const char* to_string(Mode m);

}  // namespace bb::policy
