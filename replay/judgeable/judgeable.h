// Which traced calls bbreplay can judge, as far as a trace tells without torch: the reasons a call is
// left out that need no op schema (bookkeeping, arguments that cannot be rebuilt, random ops), shared
// by bbreplay (replay/case/inputs.cpp) and `bbtrace summary --backend` (replay/judgeable/coverage_preview.h), so
// that both say the same. No torch dependency.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::replay {

inline constexpr const char* kRandomOp = "random op";
inline constexpr const char* kNoKernel = "no kernel in the backend";

// Profiler bookkeeping that computes nothing (record_function enter/exit in any namespace, the
// profiler:: ops, torch.profiler's ProfilerStep#N and "## name ##" markers): its reason, or "".
std::string bookkeeping(const std::string& op);

// The reason for an op of a library bbreplay does not load (torchvision::...).
std::string foreign_library(const std::string& op);

// Why an argument cannot be rebuilt (symbolic shapes, sparse tensors, generators, opaque objects), or "".
std::string unrebuildable_argument(const trace::ArgValue& a);

// Whether a random op's arguments make this call deterministic: a dropout probability `p` or
// `dropout_p` of 0, or `train`/`training` false. By argument name (schema names), so that every op
// with such an argument is covered. Null values: arguments left at their defaults.
bool deterministic_by_arguments(const std::vector<std::pair<std::string, const trace::ArgValue*>>& named);

}  // namespace bb::replay
