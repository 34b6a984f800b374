// One replay case: rebuild the call, run native here and the kernel under test in its own process on
// the same inputs, compare, check that inputs the schema does not let the op write were left alone, and
// time both, interleaved, with fresh inputs and a cache flush before every repetition.
#pragma once

#include <string>

#include "backends/loader.h"
#include "policy/policy.h"
#include "replay/case/inputs.h"
#include "replay/report/report.h"

namespace bb::replay {

struct RunOptions {
  c10::Device device = c10::kCPU;
  uint64_t seed = 0;
  bool check = true;            // compare the timed runs' values with native's (off for random ops' timed runs)
  // The checks beyond one call (a second input set in the same memory, the unwritten-output run):
  // --perf-only turns them off; every call's results are still compared with native's.
  bool thorough = true;
  bool time = true;             // --check-only turns timing off
  int repetitions = 25;         // timed runs per kernel (fewer if the budget runs out)
  double budget_seconds = 2.0;  // per kernel per case
  // Stop repeating once the median of each side is known this well: the half-width of its 95%
  // confidence interval, relative to it (0: always make `repetitions`).
  double precision = 0.01;
  const policy::Policy* policy = nullptr;  // tolerances; defaults when null
  bool strict_strides = false;             // --strict-strides: functional results must have native's strides too
};

class KernelProcess;

// `kernel`: the kernel's process (replay/workers/remote_kernel.h); `self_check`: it loaded no backend and runs
// native (native against native, the harness's self-check). When the kernel's process dies during the
// case the result says so (crashed; in the self-check native crashed) and `kernel` is no longer alive.
CaseResult run_case(const trace::TraceEntry& entry, const std::string& variant, KernelProcess& kernel,
                    bool self_check, const RunOptions& options);

// Where run_case writes, before each call it makes, whose code is about to run: a line `prefix` +
// "native" or "kernel" (the worker's result pipe; worker_pool.h's note_prefix), so that a crash or
// hang is charged to the side that had it. By default (-1) nothing is written.
void report_phases_to(int fd, const std::string& prefix);
// A new case: its first note is written whatever the last case's was (notes belong to one request).
void forget_phase();

// How times are taken on this device, for the report.
std::string timing_method(const RunOptions& options);

}  // namespace bb::replay
