// bbreplay --shard K/N: which cases one part of a run takes (docs/replay.md, "Parts of a run").
// Deterministic: the parts are a function of the case list and the trace alone, so N runs with the
// same arguments and --shard 0/N ... N-1/N take disjoint parts that together are every case.
// Balanced by each case's expected cost (its data, its timed runs), not by count. No torch dependency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::replay {

// K counts from 0 (Slurm's $SLURM_ARRAY_TASK_ID of an array started at 0), N >= 1, K < N.
struct ShardSpec {
  size_t k = 0, n = 1;
};

// "K/N"; throws std::invalid_argument saying what is wrong with `text`.
ShardSpec parse_shard(const std::string& text);

// What the cost of a case depends on besides the case: whether traced cases are timed, and how.
struct CostModel {
  bool timed = true;
  int repetitions = 25;
  double budget_seconds = 2.0;
};

// Bytes of the tensors of `args` (lists included; symbolic shapes count 0).
uint64_t tensor_bytes(const std::vector<trace::ArgValue>& args);

// A case's expected cost in estimated microseconds: a fixed part, its data (made, copied and
// compared several times over) and, for a timed traced case, its timed runs (from the traced device
// time where the trace has it, else from its data), within --budget. An estimate for balancing only.
uint64_t case_cost(const trace::TraceEntry& entry, const std::string& variant, const CostModel& model);

// The part (0..n-1) of each case: longest processing time first over a stable order (costliest first,
// ties by position), each case to the part with the least cost so far (ties: the lowest part).
std::vector<size_t> assign_parts(const std::vector<uint64_t>& costs, size_t n);

// The positions of the cases of part `spec.k`, in case order.
std::vector<size_t> shard_cases(const std::vector<uint64_t>& costs, const ShardSpec& spec);

}  // namespace bb::replay
