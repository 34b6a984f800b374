// What a replay found, as data: one row per case (a traced signature, or a variant of it), with its
// status, why, its integrity flags and its timings; per-op and overall figures are derived from the
// rows. Writers (report_writers.h) turn it into a console table, JSON, CSV or Markdown.
// No torch dependency.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "policy/verify/flags.h"

namespace bb::replay {

inline constexpr int kReportSchema = 2;  // bumped when a writer's output changes incompatibly

// Invalid: native itself rejected, crashed or hung on the call the harness made: a defect of the
// harness (an input it should not have built), never charged to the kernel under test.
enum class Status { Passed, Failed, Crashed, Timeout, Skipped, Invalid };
const char* to_string(Status s);

// Times of one kernel on one case, in microseconds.
struct Timing {
  double median = 0;
  double q1 = 0, q3 = 0;  // spread: interquartile range
  double min = 0;
  int samples = 0;
  double events_median = 0;  // CUDA: median of CUDA events around the call (a cross-check; 0 on CPU)
};

struct CaseResult {
  std::string op;         // aten::add.Tensor
  std::string signature;  // float32[8,32], float32[32], alpha=1
  std::string variant;    // traced, noncontiguous, special-values, ...
  uint64_t calls = 0;     // how often the traced program made this call (weight)
  Status status = Status::Skipped;
  std::string message;                          // why it failed, crashed or was skipped
  std::vector<verify::Flag> flags;              // integrity flags; a flagged case never passes
  double max_abs_error = 0, max_rel_error = 0;  // against native (where compared)
  double rtol = 0, atol = 0;                    // the tolerance applied
  std::optional<Timing> native, generated;
  std::string unstable;  // why its times are no evidence of speed (docs/replay.md); "" when they are
  // Where the time went: the case's wall seconds as bbreplay saw them (a worker's start included, when
  // one was started for it), the seconds its worker spent in it, and those by phase (replay/case/spent.h).
  double wall_s = 0, worker_s = 0;
  std::vector<std::pair<std::string, double>> spent;
  // The device time the traced program spent in this signature's calls (the trace's, scaled to every
  // call where timing was sampled); 0 where the trace has none.
  double traced_device_us = 0;
  // A random op judged by its properties (replay/random/random_judge.h): what was judged, statistically or
  // not and why; "" for every other case.
  std::string statistics;
  // ATen compute ops the kernel called that the policy's allow_aten allows (docs/policy.md): said on
  // every such case; empty for every other case.
  std::vector<std::string> aten_allowed;

  // native / generated median time: only for a passed, unflagged case timed both ways with stable times
  // (Report::speedup also withholds it when another case of the op was flagged).
  std::optional<double> speedup() const;
};

struct OpSummary {
  std::string op;
  int cases = 0, passed = 0, failed = 0, crashed = 0, skipped = 0, flagged = 0, invalid = 0;
  int unstable = 0;                        // passed cases whose times were unstable (no speedup)
  double native_us = 0, generated_us = 0;  // sum over the cases with a speedup of median x calls
  std::optional<double> speedup;           // geometric mean over those cases; none when any case was flagged
  std::vector<verify::Flag> flags;         // distinct flags seen
};

// Calls of the traced program that no case judged, per op and reason.
struct NotJudged {
  std::string op;
  std::string reason;  // "random op", "declined", "not selected by --ops", ...
  uint64_t calls = 0;
  double device_us = 0;  // traced device time of those calls (0 where the trace has none)
};

// How much of the traced program the report judged: a traced call is judged when its signature's
// traced case reached a verdict (passed, failed, crashed, timed out).
struct Coverage {
  uint64_t calls = 0, judged_calls = 0;
  double device_us = 0, judged_device_us = 0;  // 0: the trace has no device time
  std::vector<NotJudged> not_judged;           // largest share first
};

// One traced signature's share of the program and whether it was (or would be) judged: what both
// bbreplay's coverage and `bbtrace summary --backend` add up (tally_coverage).
struct CoverageItem {
  std::string op;
  std::string reason;  // why it was not judged, short (short_reason); "" when it was judged
  uint64_t calls = 0;
  double device_us = 0;
};
Coverage tally_coverage(const std::vector<CoverageItem>& items);

// A reason, short: up to its first colon or parenthesis ("random op", "declined").
std::string short_reason(const std::string& message);

struct ReportMeta {
  std::string tool;     // bbreplay <version>
  std::string trace;    // file replayed
  std::string backend;  // folder, or "native (self-check)"
  std::string device;   // cpu, cuda
  std::string torch;
  std::string date;    // UTC ISO 8601
  std::string timing;  // how times were taken
  uint64_t seed = 0;        // every input set is drawn from it (the secret, once the run is over)
  std::string seed_source;  // "--seed", or that it was a secret drawn from the OS
  // How the kernel's processes were kept from bbreplay's (namespaces, or a subreaper and why not them).
  std::string isolation;
  bool self_check = false;  // native against native: an invalid case is then a failure of the run
  // Set when the run was stopped (SIGINT, SIGTERM) before every case ran: which signal, and how many
  // of how many cases the report holds. An interrupted run never passes.
  std::string interrupted;
  // Signatures of the trace that no case of this run covers (not selected by --ops, or ops the backend
  // has no kernel for), per op: part of what the report did not judge.
  std::vector<NotJudged> not_replayed;
};

struct Overall {
  int cases = 0, passed = 0, failed = 0, crashed = 0, skipped = 0, flagged = 0, invalid = 0;
  std::optional<double> speedup;  // geometric mean over ops' speedups
  // BackendBench/KernelBench-style perf@p: the fraction of ops (with at least one non-skipped case)
  // whose cases all passed and whose speedup exceeds p; p = 0 is the correctness rate.
  std::vector<std::pair<double, double>> perf_at;  // (p, fraction)
};

struct Report {
  ReportMeta meta;
  std::vector<CaseResult> cases;

  std::vector<OpSummary> ops() const;  // in order of first appearance
  // The ops with a flagged case. A case's speedup as reported (speedup_of) is none for them: a kernel
  // caught cheating once has shown what it is; its other timings are no evidence of speed.
  std::set<std::string> flagged_ops() const;
  static std::optional<double> speedup_of(const CaseResult& c, const std::set<std::string>& flagged_ops);
  Overall overall() const;
  Coverage coverage() const;
  // Every case ran and every case that was checked passed (skips do not fail a run; invalid cases
  // fail the self-check only: with a backend they are not the kernel's doing).
  bool all_passed() const;
};

}  // namespace bb::replay
