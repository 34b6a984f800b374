// The steps of one replay case, in the order replay/case/runner.cpp runs them in the reference worker, and what
// they share. Native runs here; the kernel runs in its own process (replay/workers/remote_kernel.h), whose
// results and arguments after each call are copied here ("replicas") and judged here:
//   build inputs, run          case_call.cpp       fresh seeded inputs; one call of native (or, in the kernel's
//                                                  process, of the kernel: kernel_worker.cpp)
//   compare                    case_compare.cpp    the kernel's results against native's, with tolerances
//   integrity                  case_integrity.cpp  the checks after the first call (docs/integrity.md)
//   time                       case_timing.cpp     native and the kernel interleaved, each run checked
//   summarize                  runner.cpp          the CaseResult
// Each step returns what it found as a value (a Finding); none throws to say a kernel failed. Internal
// to bb_replay: only runner.cpp and the step files include this.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/loader.h"
#include "policy/verify/flags.h"
#include "policy/verify/result_checks.h"
#include "replay/case/inputs.h"
#include "replay/report/report.h"
#include "replay/case/runner.h"

namespace bb::replay {

using verify::Values;
class CuptiCallTimer;
class KernelProcess;
struct RemoteRun;

// What every step of a case reads.
struct CaseContext {
  const BoundCall& bound;
  const std::string& variant;
  KernelProcess& kernel;  // the kernel's process; native runs there as "the kernel" in the self-check
  bool self_check;        // no backend: native against native (the harness's self-check)
  const RunOptions& options;
  const c10::OperatorHandle& op() const { return bound.op; }
  const char* who() const { return self_check ? "native (no kernel ran)" : "the kernel"; }
};

// What a step found: nothing (why empty), or why the case fails, with the flags of the cheats caught.
struct Finding {
  std::string why;
  std::vector<verify::Flag> flags;
  bool found() const { return !why.empty(); }
};
inline Finding failure(std::string why) { return {std::move(why), {}}; }
inline Finding caught(verify::Flag flag, std::string why) { return {std::move(why), {flag}}; }

// ------------------------------------------------------------------ build inputs, run (case_call.cpp)

// Input values for the call from `seed`. On CUDA drawn on the device, else (or where that fails) on the
// CPU. Throws std::invalid_argument where the variant does not apply.
Values inputs_for(const BoundCall& call, const std::string& variant, const RunOptions& o, uint64_t seed);

// Copies of `inputs` with memory of their own (each call writes only its own).
Values copies(const Values& inputs);

// One call's results: its outputs, then the arguments the schema lets it write (in-place, out=).
// `native_call`: the first ATen compute op the kernel under test handed its work to ("" when none; always
// "" for native).
struct Called {
  Values results;
  std::string native_call;
  std::vector<std::string> allowed_aten;  // compute ops it called that the policy's allow_aten allows
};

// Runs native (kernel == null) or the kernel under test on `args`, which the call may write; every call of
// the kernel is watched for native calls. `timed`: native is entered at its backend kernel, as the kernel
// under test is (the dispatcher's autograd and view layers would otherwise be charged to native alone),
// and the caller charges the time. `sync` false: return as soon as the call returns (the CUPTI call timer
// finds out what it left running). Exceptions of the call itself (a kernel that raises or declines, native
// rejecting the call) pass through.
// The device, and the policy's allow_aten for the kernel's op, come from `o`.
Called call(const c10::OperatorHandle& op, const backends::LoadedKernel* kernel, const Values& args,
            const RunOptions& o, bool timed = false, bool sync = true);
// Native's results (no watch: nothing to find).
Values call_native(const c10::OperatorHandle& op, const Values& args, c10::Device device);

// The finding for a native call seen on one of the kernel's calls; `phase` says which ("its first call",
// "a warm-up run", ...).
Finding native_call_seen(const std::string& op, const std::string& phase);

// Says whose code runs next (report_phases_to; only when it changes); outside any timed region.
void note_phase(bool kernel);
void synchronize(c10::Device device, const char* file = __builtin_FILE(), int line = __builtin_LINE());
// Gives the device memory this process's caching allocator holds free back to the device (a no-op on the
// CPU): what one process cached from a large case is room the other process of the pair may need.
void release_device_cache(c10::Device device);

// Bytes of the results' storage: what the call must at least write.
double result_bytes(const Values& results);

// This worker's CUPTI call timer, made on first use; null (with the reason) where CUPTI is unusable.
CuptiCallTimer* call_timer(const c10::Device& device, std::string* why);

// ------------------------------------------------------------------ compare (case_compare.cpp)

// The kernel's results against native's on `inputs`: per-dtype tolerances, a float64 reference for low
// precision results, the elements native itself leaves unwritten. Fills the errors, tolerance and notes
// of `r`.
Finding compare(const CaseContext& c, const Values& inputs, const Values& native, const Values& generated,
                CaseResult& r);

// Elements of native's results that hold whatever the memory held before the call (cuDNN attention's
// RNG seed and offset when it has no dropout): native twice on the same inputs, its new memory poisoned
// differently each time. Nothing defines them: they are compared nowhere, and a kernel that leaves
// them unwritten too is not flagged. Only asked after a mismatch: honest cases never pay for it.
verify::ElementMasks native_unwritten(const c10::OperatorHandle& op, const Values& inputs, const RunOptions& o);

// ------------------------------------------------------------------ integrity (case_integrity.cpp)

// What the reference saw of a call's results leaving the kernel's process (RemoteRun::escaped: they
// changed after it returned, or are not plain memory of its process), named for `phase`. `wrong` (the
// results failed the comparison): on the CPU they are read again after 100 ms, in case work still pending
// had not written them yet (a thread not scheduled since, on a busy machine).
Finding escaped(const CaseContext& c, const RemoteRun& run, const std::string& phase, bool wrong);

// The first argument of one call of the kernel (on `args`, made from `inputs`) that it changed although
// the schema does not let it and native did not (`native_wrote`: per argument, native changed it).
// `phase` says which call ("": the first).
Finding input_mutation(const CaseContext& c, const Values& inputs, const Values& args,
                       const std::vector<bool>& native_wrote, const std::string& phase);

// Results of one call of the kernel (on `args`) that share memory with its arguments or with each other
// where native's results of the same call (on `native_args`) do not. Pointer arithmetic only: every call
// is checked, the timed ones too (outside the clock). `phase` says which call ("": the first).
Finding aliasing_after(const CaseContext& c, const Values& native_args, const Values& native, const Values& args,
                       const Values& generated, const std::string& phase);

// The checks of the kernel's first call (`first`), in the order a cheat would be caught. `native` gains
// the arguments native changed although the schema does not say so (and the kernel's results the same
// arguments of its own). `full` false (--perf-only): no unwritten-output run after a wrong result.
Finding check(const CaseContext& c, const Values& inputs, Values& native, const Values& native_args, RemoteRun& first,
              CaseResult& r, bool full = true);

// The kernel again in the memory of its first call (`first`), on a second set of input values: a result
// cached or replayed, a buffer reused across calls (not under --perf-only). Called once the first call's
// inputs and native's copies are released: it makes a set of its own.
Finding check_again(const CaseContext& c, const RemoteRun& first, CaseResult& r);

// ------------------------------------------------------------------ time (case_timing.cpp)

// Times both sides and judges the times (sets r.native, r.generated, r.unstable, or says why not timed in
// r.message).
// `first`: the kernel's first call on the case's inputs, given up: its run stays held in the kernel's
// process like a timed run's, and its replicas here are let go before the timed runs make theirs (held,
// they were every parameter of the 1B trace's _foreach_ cases twice over, and an H100 ran out of memory).
Finding time_case(const CaseContext& c, RemoteRun first, CaseResult& r);
// How the message of a case that passed its checks and ran out of memory while timed begins.
inline constexpr const char* kNotTimedOutOfMemory = "not timed: the device ran out of memory while timing it: ";

}  // namespace bb::replay
