// One replay case as a sequence of named steps (replay/case/case_steps.h says which file holds each):
//   build inputs -> run native -> run the kernel (in its process) -> integrity (compare included) -> time
//   -> what the case left in the kernel's process -> summarize.
// Each step returns what it found; the first that finds something ends the case.
#include "replay/case/runner.h"

#include <ATen/ATen.h>

#include <optional>

#include "bb/kernel.h"
#include "replay/case/case_steps.h"
#include "replay/case/poison.h"
#include "replay/workers/process_state.h"
#include "replay/random/random_judge.h"
#include "replay/workers/remote_kernel.h"
#include "replay/workers/memory.h"
#include "replay/case/spent.h"
#include "tracer/format/trace_summary.h"

namespace bb::replay {
namespace {

// A case's inputs, or why it has none (Skipped).
struct Built {
  std::optional<BoundCall> bound;
  Values inputs;
  std::string skipped;
  bool random = false;  // a random op judged by its properties (judge_random_case), not against native's values
};

// What one side's first call gave, or why the case ends there (its status and reason).
struct FirstCall {
  Called called;                    // native's
  std::optional<RemoteRun> remote;  // the kernel's
  std::optional<Status> ended;
  std::string why;
};

CaseResult summarize(CaseResult r, Status s, const std::string& why, const std::vector<verify::Flag>& flags = {}) {
  r.status = s;
  r.message = why;
  r.flags.insert(r.flags.end(), flags.begin(), flags.end());
  return r;
}

// The device type a tensor of the call was traced on when it is not `device`'s ("" when none is).
std::string traced_elsewhere(const trace::TraceEntry& entry, c10::Device device) {
  const std::string here = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  for (const auto& a : entry.args)
    for (const auto& t : a.tensors)
      if (t && t->device.substr(0, t->device.find(':')) != here) return t->device;
  return "";
}

// Step 1: bind the traced call and build its inputs.
Built build_inputs(const trace::TraceEntry& entry, const std::string& variant, const RunOptions& o) {
  Built b;
  try {
    b.bound = bind_call(entry);
    if (std::string why = unreplayable(*b.bound); !why.empty()) {
      if (judged_by_properties(*b.bound)) b.random = true;
      else
        b.skipped = why;
      return b;
    }
    b.inputs = inputs_for(*b.bound, variant, o, o.seed);
  } catch (const std::invalid_argument& e) {
    b.skipped = e.what();
  }
  return b;
}

// Step 2: native on its own copy of the inputs. A call native rejects is skipped where the trace or the
// variant explains it, else the harness's defect (Invalid).
FirstCall run_native(const CaseContext& c, const trace::TraceEntry& entry, Values& native_args) {
  FirstCall f;
  try {
    f.called.results = call_native(c.op(), native_args, c.options.device);
    return f;
  } catch (const std::exception& ex) {
    const c10::Device device = c.options.device;
    const std::string what = ex.what() + host_limit_note(ex.what());  // (a failed allocation names the limit)
    // A call traced on another device may hold what only that device's kernels accept.
    if (std::string there = traced_elsewhere(entry, device); !there.empty()) {
      f.ended = Status::Skipped;
      f.why = "native on " + device.str() + " rejects this call, traced on " + there + ": " + what;
    } else if (c.variant != "traced") {
      // A variant's other arguments (dims, sizes) were traced for the original shapes: where no meta
      // kernel could tell beforehand (ops without one), native's refusal says the variant does not apply.
      f.ended = Status::Skipped;
      f.why = "variant " + c.variant + " does not apply to this call (native rejects it): " + what;
    } else {
      f.ended = Status::Invalid;
      f.why = "native rejects this call: " + what;
    }
  }
  return f;
}

// Step 3: the kernel's first call, in its process, on the same inputs, with new memory poisoned (not
// holding old results).
FirstCall run_kernel(const CaseContext& c, const Values& inputs) {
  FirstCall f;
  try {
    const int64_t id = c.kernel.prepare(inputs);
    f.remote = c.kernel.run(id, kPoisonA);
  } catch (const bb::Decline& d) {
    f.ended = Status::Skipped;
    f.why = std::string("declined: ") + d.what();
  } catch (const std::exception& e) {
    f.ended = Status::Failed;
    f.why = std::string("the kernel raised: ") + e.what();
  }
  return f;
}

// The kernel's results on a copy of `inputs` (its own argument set, released after), for the judge of
// random ops.
Values run_remote(KernelProcess& kernel, const Values& inputs, std::string& seen, CaseResult& r) {
  const int64_t id = kernel.prepare(inputs);
  RemoteRun run = kernel.run(id);
  kernel.release(id);
  if (seen.empty()) seen = run.called.native_call;
  if (r.aten_allowed.empty()) r.aten_allowed = run.called.allowed_aten;
  return run.called.results;
}

// Steps 2-4 for a random op of replay/judgeable/random_ops.h: judged by its properties (random_judge.h) with this
// runner's calls and native-call watch, then timed like any op (without comparing the timed runs' values).
CaseResult judge_random_case(const trace::TraceEntry& entry, const BoundCall& bound, KernelProcess& kernel,
                             bool self_check, const RunOptions& o, CaseResult r) {
  std::string seen;  // the first ATen compute op the kernel handed its work to, on any of its calls
  const std::string traced = "traced";
  const RandomSides sides{[&](const BoundCall& b, uint64_t seed) {
                            return inputs_for(b, traced, o, seed);
                          },
                          [&](const BoundCall& b, const Values& in, bool k) {
                            if (!k) return call_native(b.op, copies(in), o.device);
                            return run_remote(kernel, in, seen, r);
                          }};
  try {
    const RandomVerdict v = judge_random(bound, sides, o.seed, r);
    if (!seen.empty()) {
      const Finding f = native_call_seen(seen, "a call judged by its properties");
      return summarize(r, Status::Failed, f.why, f.flags);
    }
    if (std::string there = traced_elsewhere(entry, o.device); v.status == Status::Invalid && !there.empty())
      return summarize(r, Status::Skipped,
                       "native on " + o.device.str() + " rejects this call, traced on " + there + ": " + v.message);
    if (v.status != Status::Passed) return summarize(r, v.status, v.message);
    r.status = Status::Passed;
    if (!o.time) return r;
    RunOptions unchecked = o;  // the timed runs' values are random: not compared with native's
    unchecked.check = false;
    const CaseContext c{bound, traced, kernel, self_check, unchecked};
    RemoteRun first = kernel.run(kernel.prepare(inputs_for(bound, traced, o, o.seed)));
    if (!first.called.native_call.empty()) {
      const Finding f = native_call_seen(first.called.native_call, "its first call");
      return summarize(r, Status::Failed, f.why, f.flags);
    }
    const Finding f = time_case(c, std::move(first), r);
    if (f.found()) return summarize(r, Status::Failed, f.why, f.flags);
    return r;
  } catch (const bb::Decline& d) {
    return summarize(r, Status::Skipped, std::string("declined: ") + d.what());
  } catch (const std::exception& e) {
    return summarize(r, Status::Failed, std::string("the kernel raised: ") + e.what());
  }
}

}  // namespace

namespace {

CaseResult run_case_steps(const trace::TraceEntry& entry, const std::string& variant, KernelProcess& kernel,
                          bool self_check, const RunOptions& o, CaseResult r) {
  Spent unnamed(phase::kUnnamed);
  Built built = build_inputs(entry, variant, o);
  if (!built.skipped.empty()) return summarize(r, Status::Skipped, built.skipped);
  if (built.random) return judge_random_case(entry, *built.bound, kernel, self_check, o, r);
  const CaseContext c{*built.bound, variant, kernel, self_check, o};
  Values inputs = std::move(built.inputs);

  Values native_args = copies(inputs);
  FirstCall native = run_native(c, entry, native_args);
  if (native.ended) return summarize(r, *native.ended, native.why);

  FirstCall generated = run_kernel(c, inputs);
  if (generated.ended) return summarize(r, *generated.ended, generated.why);
  RemoteRun& first = *generated.remote;
  if (!first.called.native_call.empty()) {
    const Finding f = native_call_seen(first.called.native_call, "its first call");
    return summarize(r, Status::Failed, f.why, f.flags);
  }
  r.aten_allowed = first.called.allowed_aten;

  // (--perf-only compares the first call too, and every timed run's: no figure of a kernel whose results
  // were not checked)
  const Finding f = check(c, inputs, native.called.results, native_args, first, r, o.thorough);
  if (f.found()) return summarize(r, Status::Failed, f.why, f.flags);
  // The first call's inputs and native's copies and results are not needed past here: released before the
  // second input set and the timed runs make sets of their own (a training step's optimizer lists are a
  // model's parameters, several times over; each copy held here is one fewer the device has room for).
  inputs = {}, native_args = {}, native.called.results = {};
  if (o.thorough)
    if (const Finding again = check_again(c, first, r); again.found())
      return summarize(r, Status::Failed, again.why, again.flags);
  r.status = Status::Passed;
  // Only the traced shapes are timed: they are what the program runs; the variants exist to be checked.
  if (o.time && variant == "traced") {
    const Finding t = time_case(c, std::move(first), r);
    if (t.found()) return summarize(r, Status::Failed, t.why, t.flags);
  }
  return r;
}

// The case's result, failed with a finding about the kernel's process.
CaseResult with_finding(CaseResult r, const RemoteFinding& f, const std::string& when) {
  const auto flag = verify::flag_from_name(f.flag);
  return summarize(r, Status::Failed, when + f.why + (r.message.empty() ? "" : " (the case had said: " + r.message + ")"),
                   flag ? std::vector<verify::Flag>{*flag} : std::vector<verify::Flag>{});
}

}  // namespace

CaseResult run_case(const trace::TraceEntry& entry, const std::string& variant, KernelProcess& kernel,
                    bool self_check, const RunOptions& o) {
  Spent unnamed(phase::kUnnamed);
  CaseResult r;
  r.op = entry.op;
  r.signature = trace::signature_text(entry);
  r.variant = variant;
  r.calls = entry.count;
  try {
    Spent spent(phase::kTransfer);
    if (auto problem = kernel.bind(entry.op))
      return summarize(r, problem->first ? Status::Failed : Status::Skipped, problem->second);
  } catch (const std::invalid_argument&) {
    // (an op the kernel's torch does not know: building the inputs says why)
  } catch (const KernelGone& g) {
    return summarize(r, Status::Crashed, g.why);
  }
  try {
    r = run_case_steps(entry, variant, kernel, self_check, o, r);
    std::vector<RemoteFinding> found;
    {
      Spent spent(phase::kIntegrity);
      found = kernel.end_case();
    }
    const std::vector<RemoteFinding>& load = kernel.load().findings;
    found.insert(found.begin(), load.begin(), load.end());
    // A declined call is not judged, but what loading the backend did (an override of ATen's kernels,
    // ATen compute at load time) is the backend's, whatever its calls do: its cases are flagged.
    if (!found.empty() && (r.status != Status::Skipped || !load.empty())) r = with_finding(r, found.front(), "");
  } catch (const KernelGone& g) {
    // (in the self-check native ran there: the worker's loop charges it as native's crash)
    return summarize(r, Status::Crashed, g.why);
  }
  // Process-wide state the case's calls changed in this process (where only native runs) is set back, and
  // the case fails: native's calls change none of it.
  if (std::string what = restore_process_baseline(); !what.empty())
    return summarize(r, Status::Failed,
                     "native changed process-wide state that its runs depend on: " + what +
                         (r.message.empty() ? "" : " (the case had said: " + r.message + ")"),
                     {verify::Flag::EnvironmentTampering});
  return r;
}

}  // namespace bb::replay
