// bbreplay's parts, for its own files only. Three kinds of process (docs/integrity.md, "Who runs what"):
// bbreplay itself, which never loads a backend's code and alone writes reports; per worker slot a
// reference worker, which runs native, makes every input and judges every result; and under it a
// kernel worker (kernel_worker.h), the only one that loads the backend. bbreplay.cpp: the command line
// and main; bbreplay_setup.cpp: what bbreplay and its reference workers set up alike, shards, worker
// slots; bbreplay_worker.cpp: a reference worker's loop; bbreplay_run.cpp: bbreplay's loop over the
// cases; python_host.cpp: a kernel worker inside a Python host.
#pragma once

#include <cstdint>
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/loader.h"
#include "policy/policy.h"
#include "replay/case/cases.h"
#include "replay/parts/part.h"
#include "replay/report/report.h"
#include "replay/case/runner.h"
#include "tracer/format/tool_cli.h"
#include "tracer/format/trace_model.h"

namespace bb::replay::app {

using Usage = tool::UsageError;

// bbreplay's command line (bbreplay.cpp declares each option and its help).
struct Options {
  std::string trace, backend, policy, ops, device, variants, json, csv, markdown;
  std::optional<uint64_t> seed;  // --seed: reproduces a run; unset: a secret drawn from the OS
  bool check_only = false, perf_only = false, list = false, worker = false, strict_strides = false;
  bool native_only = false;  // (a reference worker: start the kernel worker without the backend)
  bool quiet = false;        // --quiet: no progress on stderr
  double progress_every = 10;  // --progress-every: seconds between progress lines when stderr is not a terminal
  std::string isolation = "auto";
  int trace_fd = -1, policy_fd = -1;  // (a reference worker: the trace and policy bbreplay read, sealed)
  int repetitions = 25, jobs = 1;
  double precision = 0.01;
  std::string gpus, shard;
  double budget = 2.0, timeout = 300;
  // 0: no limit. Unset (nullopt): the defaults, derived from the free memory (docs/replay.md, "Memory").
  std::optional<uint64_t> max_case_bytes, worker_memory;
  std::string write_policy;          // --write-policy: the routing policy the judgement earns (written_policy.h)
  std::optional<double> min_speedup;  // --min-speedup: ... and the speedup an op needs besides
};

// Everything bbreplay and its reference workers set up the same way. The backend is surveyed (its
// kernels built), never loaded: only kernel workers run its code.
struct Setup {
  trace::Trace trace;
  std::optional<policy::Policy> policy;
  std::string policy_text;  // as bbreplay read it (a reference worker hands it to its kernel worker)
  backends::Survey backend;
  bool has_backend = false;
  bool python_kernels = false;  // the backend has Python kernels: its kernel workers run inside Python
  RunOptions run;
  std::vector<Case> cases;
  std::vector<Case> other_cases;  // --shard: the cases of the other parts

  // Why an op's cases need no worker: the backend has no folder for it (skipped), or its kernel could
  // not be built (failed); nullopt when a worker must judge it.
  std::optional<CaseResult> problem_for(const std::string& op) const {
    if (!has_backend) return std::nullopt;
    CaseResult r;
    if (auto it = backend.unusable.find(op); it != backend.unusable.end()) {
      r.status = Status::Failed;
      r.message = "the kernel is not usable: " + it->second;
      return r;
    }
    if (std::find(backend.ops.begin(), backend.ops.end(), op) != backend.ops.end()) return std::nullopt;
    r.status = Status::Skipped;
    r.message = "the backend has no kernel for this op";
    return r;
  }
};

// `worker`: a reference worker, told each case by bbreplay; it neither surveys the backend nor lists the
// cases (asking native on meta tensors which variants apply took about a second, at every worker start)
// nor warns.
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

// A reference worker: serves the cases bbreplay sends on stdin (worker_pool.h's protocol).
int worker_main(const Options& o);

// Torch's warnings in this process (bbreplay's or a worker's): each text printed once, the repeats dropped.
// Native's calls on the variants' inputs warn case after case (an out= tensor resized, ...), and their lines
// broke bbreplay's progress line.
void warn_each_once();

// The command that starts a kernel worker for this backend (inside Python for Python kernels).
std::vector<std::string> kernel_worker_argv(bool python);

// SIGINT or SIGTERM to bbreplay: the case in progress is abandoned, its worker killed, and the report
// of the cases done so far is written (an interrupted run exits 1). A second signal ends bbreplay at
// once, as if it had no handler.
void stop_on_signals();

// How bbreplay starts its reference workers: the command, the same with the backend left out (the one that
// decides whether a crash was native's), and their first line's greeting (the run's secret seed).
struct Launch {
  std::vector<std::string> argv, native_argv;
  std::string greeting;
};

// The cases, in order, spread over one worker per entry of `slots` (a thread each, taking the next
// case as it finishes one); the report lists them in case order whichever worker ran them.
// `positions`, if given, gets the position in s.cases of each case of the report.
Report run_all(const Options& o, const Setup& s, const Launch& launch, const std::vector<WorkerEnv>& slots,
               std::vector<size_t>* positions = nullptr);

// Python kernels run in a process that hosts Python (docs/backends.md).
bool has_python_kernels(const std::string& dir);

}  // namespace bb::replay::app
