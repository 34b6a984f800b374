// Step "integrity" of a replay case (replay/case_steps.h): the checks after the kernel's first call, in
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
#include "replay/case_steps.h"
#include "replay/poison.h"
#include "replay/spent.h"

namespace bb::replay {
namespace {

using verify::Flag;

// The bytes a CPU tensor's elements span ("" for others): a plain copy, no ATen call, so that a snapshot
// starts as soon as the call returned.
std::string bytes_of(const at::Tensor& t) {
  if (!t.defined() || !t.is_cpu() || t.layout() != at::kStrided || !t.has_storage() || t.numel() == 0) return "";
  const size_t n = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.itemsize());
  return std::string(static_cast<const char*>(t.const_data_ptr()), n);
}

// After a failed comparison: the kernel again on the same inputs with the memory it is given poisoned
// differently. Elements that changed with the poison were never written.
Finding unwritten(const CaseContext& c, const Values& inputs, const Values& first) {
  const RunOptions& o = c.options;
  Called again;
  try {
    Values args = copies(inputs);
    PoisonScope poison(kPoisonB, o.device, poison_reserve(first));
    again = call(c.op(), c.kernel, args, o);
  } catch (const std::exception&) {
    return {};  // (a kernel that raises on the re-run says nothing about its memory)
  }
  if (!again.native_call.empty()) return native_call_seen(again.native_call, "its unwritten-output re-run");
  try {
    if (verify::unwritten_elements(first, again.results).empty()) return {};
    std::string why = verify::unwritten_elements(first, again.results, native_unwritten(c.op(), inputs, o));
    return why.empty() ? Finding{} : caught(Flag::UnwrittenOutput, why);
  } catch (const std::exception&) {
    return {};
  }
}

// Copies the values of `from` into the memory of `into` (same layouts), storage and all.
void refill_tensor(const at::Tensor& dst, const at::Tensor& src) {
  if (!dst.defined() || !src.defined() || dst.storage().nbytes() != src.storage().nbytes()) return;
  const int64_t n = static_cast<int64_t>(src.storage().nbytes() / src.element_size());
  dst.as_strided({n}, {1}, 0).copy_(src.as_strided({n}, {1}, 0));
}

void refill(Values& into, const Values& from) {
  for (size_t i = 0; i < into.size() && i < from.size(); ++i) {
    if (into[i].isTensor() && from[i].isTensor()) refill_tensor(into[i].toTensor(), from[i].toTensor());
    if (!into[i].isList() || !from[i].isList()) continue;
    auto dst = into[i].toListRef(), src = from[i].toListRef();
    for (size_t k = 0; k < dst.size() && k < src.size(); ++k)
      if (dst[k].isTensor() && src[k].isTensor()) refill_tensor(dst[k].toTensor(), src[k].toTensor());
  }
}

// The kernel again, in the very memory of its first call, on new input values: a result cached by
// data pointer, a constant result or a buffer reused across calls shows here. Exceptions of the calls
// pass to the caller.
Finding second_input_set(const CaseContext& c, Values& args, const Values& first, size_t outputs, const CaseResult& r) {
  const RunOptions& o = c.options;
  const Values inputs2 = inputs_for(c, o.seed + 1000003);
  Values native_args2 = copies(inputs2);
  Values native2 = call_native(c.op(), native_args2, o.device);
  Values kept;
  for (size_t k = 0; k < outputs && k < first.size(); ++k) kept.push_back(verify::deep_copy(first[k]));
  refill(args, inputs2);
  Called generated2;
  Snapshot returned;
  {
    PoisonScope poison(kPoisonA, o.device, poison_reserve(native2));
    generated2 = call(c.op(), c.kernel, args, o);
    returned = snapshot(c, generated2.results);
  }
  const std::string phase = "its call on a second set of input values";
  if (!generated2.native_call.empty()) return native_call_seen(generated2.native_call, phase);
  const Values& g = generated2.results;
  // (every call's results are judged for aliasing, not only the first's: a kernel may alias later)
  if (Finding f = aliasing_after(c, native_args2, native2, args, g, phase); f.found()) return f;
  Values n2(native2.begin(), native2.begin() + std::min(outputs, native2.size()));
  Values g2(g.begin(), g.begin() + std::min(outputs, g.size()));
  CaseResult scratch = r;  // (the second set's errors and notes are not the case's)
  const Finding wrong = compare(c, inputs2, n2, g2, scratch);
  if (Finding e = escaped(c, returned, g, phase, wrong.found()); e.found()) return e;
  if (wrong.found()) {
    if (verify::bitwise_equal(kept, g2))
      return caught(Flag::CachedResult,
                    "on new input values in the same memory the kernel returned exactly its "
                    "previous result (a result cached or replayed, not computed): " +
                        wrong.why);
    return failure("wrong on a second set of input values: " + wrong.why);
  }
  // (results inside this call's arguments, as in-place ops return them, are in the same memory by design;
  // that they may be was judged against native above)
  if (verify::shares_storage(first, g, outputs, args))
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

Snapshot snapshot(const CaseContext& c, const Values& results) {
  Snapshot s;
  if (!c.options.device.is_cpu()) return s;
  s.taken = true;
  for (const at::Tensor& t : verify::tensors_of(results)) s.bytes.push_back(bytes_of(t));
  return s;
}

Finding escaped(const CaseContext& c, const Snapshot& snapshot, const Values& later, const std::string& phase,
                bool wrong) {
  if (!snapshot.taken) return {};
  Spent spent(phase::kIntegrity);
  const std::vector<at::Tensor> now = verify::tensors_of(later);
  auto changed = [&] {
    for (size_t k = 0; k < snapshot.bytes.size() && k < now.size(); ++k)
      if (bytes_of(now[k]) != snapshot.bytes[k]) return true;
    return false;
  };
  // A wrong result may be one that work still pending has not written yet (a thread not scheduled since,
  // on a busy machine): it is given time to show. Right results never wait.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wrong ? 100 : 0);
  for (;;) {
    if (changed())
      return caught(Flag::EscapingWork, phase +
                                            ": the kernel's results changed after it returned (work that escaped "
                                            "the call, e.g. on a thread of its own, was still writing them)");
    if (std::chrono::steady_clock::now() >= until) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Finding check(const CaseContext& c, const Values& inputs, Values& native, const Values& native_args, Values& args,
              Values& generated, const Snapshot& returned, CaseResult& r) {
  const c10::FunctionSchema& schema = c.op().schema();
  std::vector<bool> native_wrote;
  {
    Spent spent(phase::kIntegrity);
    // Arguments native changed although the schema does not say so (batch_norm's running stats) are
    // results too; a kernel must change them the same way.
    native_wrote = verify::unwritable_changes(schema, inputs, native_args);
  }
  for (size_t i = 0; i < native_wrote.size(); ++i)
    if (native_wrote[i]) native.push_back(native_args[i]), generated.push_back(args[i]);
  if (Finding f = input_mutation(c, inputs, args, native_wrote, ""); f.found()) return f;
  const size_t outputs = schema.returns().size();
  if (Finding f = aliasing_after(c, native_args, native, args, generated, ""); f.found()) return f;
  Finding wrong = compare(c, inputs, native, generated, r);
  // (after the comparison: the longer the wait, the more escaped work shows; and before the second input
  // set, which refills the memory of in-place results)
  if (Finding e = escaped(c, returned, generated, "its first call", wrong.found()); e.found()) return e;
  if (wrong.found()) {
    Finding u = unwritten(c, inputs, generated);
    if (!u.found()) return wrong;
    u.flags.insert(u.flags.begin(), wrong.flags.begin(), wrong.flags.end());
    return u;
  }
  // (in the self-check too: native must pass every integrity check, or the checks accuse wrongly)
  try {
    return second_input_set(c, args, generated, outputs, r);
  } catch (const bb::Decline&) {
    return {};  // declining other values is the kernel's right; the check did not happen
  } catch (const std::exception& e) {
    return failure(std::string("the kernel raised on a second set of input values: ") + e.what());
  }
}

}  // namespace bb::replay
