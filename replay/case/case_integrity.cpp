// Step "integrity" of a replay case (replay/case/case_steps.h): the checks after the kernel's first call, in
// the order a cheat would be caught (docs/integrity.md).
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "bb/kernel.h"
#include "policy/verify/integrity.h"
#include "policy/verify/result_checks.h"
#include "policy/verify/values.h"
#include "replay/case/case_steps.h"
#include "replay/case/poison.h"
#include "replay/workers/remote_kernel.h"
#include "replay/case/spent.h"

namespace bb::replay {
namespace {

using verify::Flag;

// After a failed comparison: the kernel again, on an argument set of its own made from the same inputs,
// with the memory it is given poisoned differently. Elements that changed with the poison were never
// written.
Finding unwritten(const CaseContext& c, const Values& inputs, const Values& first) {
  const RunOptions& o = c.options;
  RemoteRun again;
  try {
    const int64_t id = c.kernel.prepare(inputs);
    again = c.kernel.run(id, kPoisonB);
    c.kernel.release(id);
  } catch (const std::exception&) {
    return {};  // (a kernel that raises on the re-run says nothing about its memory)
  }
  if (!again.called.native_call.empty())
    return native_call_seen(again.called.native_call, "its unwritten-output re-run");
  try {
    if (verify::unwritten_elements(first, again.called.results).empty()) return {};
    std::string why =
        verify::unwritten_elements(first, again.called.results, native_unwritten(c.op(), inputs, o));
    return why.empty() ? Finding{} : caught(Flag::UnwrittenOutput, why);
  } catch (const std::exception&) {
    return {};
  }
}

// The kernel again, in the very memory of its first call (its argument set, refilled with new values),
// on new input values: a result cached by data pointer, a constant result or a buffer reused across calls
// shows here. Exceptions of the calls pass to the caller.
Finding second_input_set(const CaseContext& c, const RemoteRun& first, size_t outputs, const CaseResult& r) {
  const RunOptions& o = c.options;
  const Values inputs2 = inputs_for(c.bound, c.variant, o, o.seed + 1000003);
  Values native_args2 = copies(inputs2);
  Values native2 = call_native(c.op(), native_args2, o.device);
  const Values& f = first.called.results;
  const Values kept(f.begin(), f.begin() + std::min(outputs, f.size()));  // (replicas: the first call's bytes)
  c.kernel.refill(first.id, inputs2);
  const RemoteRun second = c.kernel.run(first.id, kPoisonA);
  const std::string phase = "its call on a second set of input values";
  if (!second.called.native_call.empty()) return native_call_seen(second.called.native_call, phase);
  if (!second.out_of_bounds.empty()) return failure(phase + ": " + second.out_of_bounds);
  const Values& g = second.called.results;
  // (every call's results are judged for aliasing, not only the first's: a kernel may alias later)
  if (Finding a = aliasing_after(c, native_args2, native2, second.args, g, phase); a.found()) return a;
  Values n2(native2.begin(), native2.begin() + std::min(outputs, native2.size()));
  Values g2(g.begin(), g.begin() + std::min(outputs, g.size()));
  CaseResult scratch = r;  // (the second set's errors and notes are not the case's)
  const Finding wrong = compare(c, inputs2, n2, g2, scratch);
  if (Finding e = escaped(c, second, phase, wrong.found()); e.found()) return e;
  if (wrong.found()) {
    if (same_bytes(kept, g2))
      return caught(Flag::CachedResult,
                    "on new input values in the same memory the kernel returned exactly its "
                    "previous result (a result cached or replayed, not computed): " +
                        wrong.why);
    return failure("wrong on a second set of input values: " + wrong.why);
  }
  // (results inside this call's arguments, as in-place ops return them, are in the same memory by design;
  // that they may be was judged against native above)
  if (reuses(first, second, outputs))
    return caught(Flag::Aliasing,
                  "the kernel returned the memory of its previous call's result again (a buffer reused across calls)");
  return {};
}

}  // namespace

Finding aliasing_after(const CaseContext& c, const Values& native_args, const Values& native, const Values& args,
                       const Values& generated, const std::string& phase) {
  Spent spent(phase::kIntegrity);
  const c10::FunctionSchema& schema = c.op().schema();
  const std::string a =
      verify::aliasing_native_lacks(schema, native_args, native, args, generated, schema.returns().size());
  if (a.empty()) return {};
  return caught(Flag::Aliasing, (phase.empty() ? "" : phase + ": ") + a +
                                    ", which native's does not (a result must not be, or be inside, an input)");
}

Finding input_mutation(const CaseContext& c, const Values& inputs, const Values& args,
                       const std::vector<bool>& native_wrote, const std::string& phase) {
  std::string mutated;
  {
    Spent spent(phase::kIntegrity);
    mutated = verify::first_unwritable_change(c.op().schema(), inputs, args, native_wrote);
  }
  if (mutated.empty()) return {};
  return caught(Flag::InputMutation, (phase.empty() ? "" : phase + ": ") + "the kernel changed input '" + mutated +
                                         "', which the schema does not let it write");
}

Finding escaped(const CaseContext& c, const RemoteRun& run, const std::string& phase, bool wrong) {
  Spent spent(phase::kIntegrity);
  const std::string prefix = phase.empty() ? "" : phase + ": ";
  if (!run.shared.empty()) return caught(Flag::Aliasing, prefix + run.shared);
  if (!run.escaped.empty()) return caught(Flag::EscapingWork, prefix + run.escaped);
  if (!wrong || !c.options.device.is_cpu()) return {};
  // A wrong result may be one that work still pending has not written yet: read again a little later.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const RemoteRun later = c.kernel.reread(run);
  if (!later.escaped.empty() || !same_bytes(run.called.results, later.called.results))
    return caught(Flag::EscapingWork, prefix +
                                          "the kernel's results changed after it returned (work that escaped the "
                                          "call, e.g. on a thread of its own, was still writing them)");
  return {};
}

Finding check(const CaseContext& c, const Values& inputs, Values& native, const Values& native_args, RemoteRun& first,
              CaseResult& r, bool full) {
  Spent unnamed(phase::kUnnamed);
  const c10::FunctionSchema& schema = c.op().schema();
  std::vector<bool> native_wrote;
  {
    Spent spent(phase::kIntegrity);
    // Arguments native changed although the schema does not say so (batch_norm's running stats) are
    // results too; a kernel must change them the same way.
    native_wrote = verify::unwritable_changes(schema, inputs, native_args);
  }
  // (before its values: memory written outside its own makes any result suspect)
  if (!first.out_of_bounds.empty()) return failure("its first call: " + first.out_of_bounds);
  const Values& args = first.args;
  Values generated = first.called.results;
  for (size_t i = 0; i < native_wrote.size() && i < args.size(); ++i)
    if (native_wrote[i]) native.push_back(native_args[i]), generated.push_back(args[i]);
  if (Finding f = input_mutation(c, inputs, args, native_wrote, ""); f.found()) return f;
  if (Finding f = aliasing_after(c, native_args, native, args, generated, ""); f.found()) return f;
  Finding wrong = compare(c, inputs, native, generated, r);
  if (Finding e = escaped(c, first, "its first call", wrong.found()); e.found()) return e;
  if (wrong.found()) {
    Finding u = full ? unwritten(c, inputs, generated) : Finding{};
    if (!u.found()) return wrong;
    u.flags.insert(u.flags.begin(), wrong.flags.begin(), wrong.flags.end());
    return u;
  }
  return {};
}

Finding check_again(const CaseContext& c, const RemoteRun& first, CaseResult& r) {
  Spent unnamed(phase::kUnnamed);
  // (in the self-check too: native must pass every integrity check, or the checks accuse wrongly)
  try {
    return second_input_set(c, first, c.op().schema().returns().size(), r);
  } catch (const bb::Decline&) {
    return {};  // declining other values is the kernel's right; the check did not happen
  } catch (const std::exception& e) {
    return failure(std::string("the kernel raised on a second set of input values: ") + e.what());
  }
}

}  // namespace bb::replay
