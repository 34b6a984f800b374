// bbreplay's parts, for its own files only (bbreplay.cpp: the command line and main; bbreplay_setup.cpp:
// what a parent and its workers set up alike, shards, worker slots; bbreplay_worker.cpp: a worker's loop;
// bbreplay_run.cpp: the parent's loop over the cases; python_host.cpp: running inside a Python host).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/loader.h"
#include "policy/policy.h"
#include "replay/cases.h"
#include "replay/part.h"
#include "replay/report.h"
#include "replay/runner.h"
#include "tracer/format/tool_cli.h"
#include "tracer/format/trace_model.h"

namespace bb::replay::app {

using Usage = tool::UsageError;

// bbreplay's command line (bbreplay.cpp declares each option and its help).
struct Options {
  std::string trace, backend, policy, ops, device, variants, json, csv, markdown;
  uint64_t seed = 0;
  bool check_only = false, perf_only = false, list = false, worker = false, strict_strides = false;
  int repetitions = 25, jobs = 1;
  double precision = 0.01;
  std::string gpus, shard;
  double budget = 2.0, timeout = 300;
  // 0: no limit. Unset (nullopt): the defaults, derived from the free memory (docs/replay.md, "Memory").
  std::optional<uint64_t> max_case_bytes, worker_memory;
};

// Everything a parent and its workers set up the same way.
struct Setup {
  trace::Trace trace;
  std::optional<policy::Policy> policy;
  backends::Backend backend;
  bool has_backend = false;
  RunOptions run;
  std::vector<Case> cases;
  std::vector<Case> other_cases;  // --shard: the cases of the other parts

  const backends::LoadedKernel* kernel_for(const std::string& op) const {
    for (const auto& k : backend.kernels)
      if (k.op == op) return &k;
    return nullptr;
  }

  // Why an op has no usable kernel: a folder whose kernel failed to build or load fails the op's
  // cases with that message; an op without a folder is skipped.
  CaseResult problem_for(const std::string& op) const {
    CaseResult r;
    if (auto it = backend.unusable.find(op); it != backend.unusable.end()) {
      r.status = Status::Failed;
      r.message = "the kernel is not usable: " + it->second;
    } else {
      r.status = Status::Skipped;
      r.message = "the backend has no kernel for this op";
    }
    return r;
  }
};

// `worker`: a worker process, told each case by the parent; it neither lists the cases (asking native
// on meta tensors which variants apply took about a second, at every worker start) nor warns.
Setup set_up(const Options& o, bool worker);

// A result that only says what happened to a case (skipped, crashed, ...) and why.
CaseResult describe(const trace::TraceEntry& e, const std::string& variant, Status st, const std::string& why);

// This library (libbbreplay.so)'s folder and the bbreplay executable next to it: bbreplay's own files
// are found from here, not from /proc/self/exe, which is python when bbreplay runs inside a Python host.
std::string library_path();
std::string lib_dir();
std::string exe_path();

// One worker's environment: what it adds to or changes in bbreplay's own (CUDA_VISIBLE_DEVICES for a
// worker pinned to one GPU).
using WorkerEnv = std::vector<std::pair<std::string, std::string>>;

// Each worker's environment: one per GPU of --gpus (CUDA_VISIBLE_DEVICES naming it, mapped through
// bbreplay's own CUDA_VISIBLE_DEVICES when that is set), --jobs copies of bbreplay's own otherwise.
std::vector<WorkerEnv> worker_slots(const Options& o, const Setup& s);

// --shard K/N: keeps this part's cases in s.cases, the others' in s.other_cases (shard.h).
PartInfo take_shard(const Options& o, Setup& s);

// A worker process: serves the cases the parent sends on stdin (worker_pool.h's protocol).
int worker_main(const Options& o);

// SIGINT or SIGTERM to bbreplay: the case in progress is abandoned, its worker killed, and the report
// of the cases done so far is written (an interrupted run exits 1). A second signal ends bbreplay at
// once, as if it had no handler.
void stop_on_signals();

// The cases, in order, spread over one worker per entry of `slots` (a thread each, taking the next
// case as it finishes one); the report lists them in case order whichever worker ran them.
// `positions`, if given, gets the position in s.cases of each case of the report.
Report run_all(const Options& o, const Setup& s, const std::vector<std::string>& worker_argv,
               const std::vector<WorkerEnv>& slots, std::vector<size_t>* positions = nullptr);

// Python kernels run in a process that hosts Python (docs/backends.md).
bool has_python_kernels(const std::string& dir);
// Runs bbreplay again inside the Python the build is for; returns only when that cannot start (then: why).
std::string run_in_python(int argc, char** argv);

}  // namespace bb::replay::app
