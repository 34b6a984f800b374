// The routing policy a judgement earns (bbreplay --write-policy, docs/policy.md "From a judgement"): the
// ops whose kernels passed every case that was judged — none failed, crashed or was flagged — and, with a
// least speedup, were that much faster by device time. Judged under a policy, each op keeps its entry as
// written there (conditions, allow_aten, tolerances): a written policy never routes a call the judgement
// did not cover by its conditions.
#pragma once

#include <optional>
#include <string>

#include "replay/report/report.h"

namespace bb::replay::app {

// `backend`: the folder judged (written as an absolute path); `judged_under`: the policy's text as bbreplay
// read it, "" for none. Every op of the report is named: the routed ones as entries, the others in a
// comment above with why.
std::string written_policy(const Report& report, const std::string& backend, const std::string& judged_under,
                           std::optional<double> min_speedup);

}  // namespace bb::replay::app
