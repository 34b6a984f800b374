// Arguments that are outputs of a forward op — pooling indices, saved normalization statistics,
// softmax outputs — are made by running that forward op on the case's own generated inputs, so that
// a backward op gets what a real program gives it (random indices outside their pooling windows made
// native's CPU kernel abort; docs/replay.md, "Inputs"). One table, here.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "replay/case/inputs.h"

namespace bb::replay {

// Whether argument `name` of this op is derived.
bool is_derived(const c10::FunctionSchema& schema, const std::string& name);

// Replaces the derived arguments of `values` (the call's inputs, in schema order) by the forward op's
// results on the other inputs. Nothing for other ops. Throws std::invalid_argument when the forward op
// cannot run on these inputs or gives other shapes than the call's (no valid value can be made).
void derive_arguments(const BoundCall& call, std::vector<c10::IValue>& values);

}  // namespace bb::replay
