// Random ops judged by their properties, not against native's values (docs/replay.md, "Random
// ops"): the table in replay/judgeable/random_ops.h says which ops and which distribution; this judges a
// kernel's results: shape, dtype, layout and device as native's; values in the distribution's range;
// exact binomial bounds on counts (the kept fraction of dropout and bernoulli, the quantiles of
// fills) at a stated false-alarm rate; dropped values zero and kept ones scaled as native scales;
// two calls on the same inputs differ; and the same once more with the parameters changed (a kernel
// that ignores p fails). Inputs smaller than stats::kDecidable elements are enlarged first.
#pragma once

#include <functional>
#include <string>

#include "replay/case/inputs.h"
#include "replay/report/report.h"

namespace bb::replay {

using Values = std::vector<c10::IValue>;

// Whether the call is judged here: its op is in the table and nothing else (symbolic shapes, other
// layouts) keeps it from being rebuilt.
bool judged_by_properties(const BoundCall& call);

// How the judge makes and runs calls (the runner's own ways, with its native-call watch).
struct RandomSides {
  std::function<Values(const BoundCall&, uint64_t seed)> inputs;
  // The call's results (outputs, then the arguments it may write) on a copy of `inputs`; `kernel`
  // false: native. The kernel's exceptions propagate.
  std::function<Values(const BoundCall&, const Values& inputs, bool kernel)> run;
};

// The verdict: status Passed, Failed (with a message, and a flag in r.flags where one applies) or
// Invalid (native itself rejected the call). Fills r.statistics with what was judged.
struct RandomVerdict {
  Status status = Status::Passed;
  std::string message;
};
RandomVerdict judge_random(const BoundCall& call, const RandomSides& sides, uint64_t seed, CaseResult& r);

// Probabilities drawn in [0, 1) (seeded) into the argument of an op that takes them as a tensor
// (bernoulli's self, bernoulli_'s p): inputs drawn as for any op would make native reject the call.
void prepare_random_inputs(const BoundCall& call, std::vector<c10::IValue>& values, uint64_t seed);

}  // namespace bb::replay
