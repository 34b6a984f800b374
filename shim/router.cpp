#include "shim/router.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <atomic>
#include <iomanip>
#include <mutex>
#include <sstream>

#include "backends/op_names.h"
#include "policy/verify/compare.h"
#include "policy/verify/flags.h"
#include "policy/verify/integrity.h"
#include "policy/verify/native_watch.h"
#include "policy/verify/values.h"
#include "shim/crash_guard.h"
#include "tracer/format/op_name.h"
#include "tracer/int_range.h"
#include "tracer/log.h"
#include "tracer/names.h"
#include "tracer/observer.h"

namespace bb::shim {
namespace {

using Stack = torch::jit::Stack;

constexpr size_t kMismatchesKept = 5;

struct OpStats {
  std::atomic<uint64_t> calls{0}, routed{0}, declined{0}, unmet{0}, passthrough{0}, errors{0}, native_calls{0},
      shadowed{0}, mismatched{0}, aten_allowed{0};
  std::mutex mu;
  std::string first_decline, first_error, first_native_call;
  std::string aten_allowed_ops;         // the compute ops the policy's allow_aten let the kernel call, first seen
  std::vector<std::string> mismatches;  // the first kMismatchesKept, as text
  double max_abs = 0, max_rel = 0;      // shadow mode: largest errors over every compared call
  uint64_t first_mismatch_call = 0;     // shadow mode: which compared call (1-based) first left tolerance
};

struct Route;
struct ActiveKernel {  // a generated kernel running on this thread
  const Route* route;
  bool reentered;  // it called the op it replaces
  ActiveKernel* outer;
};
thread_local ActiveKernel* t_active = nullptr;
thread_local int t_bypass = 0;  // > 0: our own ATen calls (clones, comparisons) are never routed

struct Bypass {
  Bypass() { ++t_bypass; }
  ~Bypass() { --t_bypass; }
  Bypass(const Bypass&) = delete;
  Bypass& operator=(const Bypass&) = delete;
};

enum class Outcome { Routed, Declined, Failed, NativeCall };

std::string args_text(c10::ArrayRef<c10::IValue> args) {
  std::ostringstream s;
  bool first = true;
  for (const auto& a : args) {
    if (!a.isTensor() || !a.toTensor().defined()) continue;
    const auto& t = a.toTensor();
    s << (first ? "" : ", ") << names::dtype(t.scalar_type()) << t.sizes();
    first = false;
  }
  return s.str();
}

bool plain_inputs(c10::ArrayRef<c10::IValue> args) {
  auto plain = [](const c10::IValue& v) {
    return !v.isTensor() || !v.toTensor().defined() || tracer::is_plain_dense(v.toTensor());
  };
  for (const auto& a : args) {
    if (!plain(a)) return false;
    if (a.isTensorList() || a.isList())
      for (const auto& x : a.toListRef())
        if (!plain(x)) return false;
  }
  return true;
}

struct Route final : c10::OperatorKernel {
  Route(backends::LoadedKernel k, policy::OpPolicy r, const policy::Policy* p)
      : kernel(std::move(k)), rule(std::move(r)), policy(p), nargs(kernel.handle.schema().arguments().size()) {}

  backends::LoadedKernel kernel;
  policy::OpPolicy rule;
  const policy::Policy* policy;
  size_t nargs;
  mutable OpStats stats;

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, Stack* stack) {
    if (t_bypass) return native(op, ks, stack);  // our own clones and comparisons: not the program's calls
    stats.calls.fetch_add(1, std::memory_order_relaxed);
    auto args = torch::jit::last(*stack, nargs);
    if (rule.mode == policy::Mode::Off) return native(op, ks, stack);
    if (!plain_inputs(args)) {  // meta, fake, sparse, quantized, wrapped: not ours
      stats.passthrough.fetch_add(1, std::memory_order_relaxed);
      return native(op, ks, stack);
    }
    if (policy::unmet(rule.when, args)) {
      stats.unmet.fetch_add(1, std::memory_order_relaxed);
      return native(op, ks, stack);
    }
    for (ActiveKernel* a = t_active; a; a = a->outer) {
      if (a->route != this) continue;
      a->reentered = true;  // the generated kernel calls the op it replaces: serve it natively
      return native(op, ks, stack);
    }
    if (rule.mode == policy::Mode::Shadow) return shadow(op, ks, stack);
    const size_t base = stack->size() - nargs;
    Stack saved(stack->begin() + base, stack->end());
    if (call_generated(op, ks, stack) == Outcome::Routed) {
      const Stack outputs(stack->begin() + base, stack->end());
      const std::string alias = verify::undeclared_aliasing(op.schema(), saved, outputs);
      if (alias.empty()) {
        stats.routed.fetch_add(1, std::memory_order_relaxed);
        tracer::mark_routed();
        return;
      }
      // A result in an input's memory where the op makes new memory: the program would see it change.
      stats.errors.fetch_add(1, std::memory_order_relaxed);
      note_once(stats.first_error, "aliasing: " + alias);
      log::warn_once("alias:" + kernel.op, "generated kernel for " + where() + ": " + alias +
                                               "; its result was discarded and the native kernel ran");
    }
    stack->resize(base);
    stack->insert(stack->end(), saved.begin(), saved.end());
    native(op, ks, stack);
  }

  static void native(const c10::OperatorHandle& op, c10::DispatchKeySet ks, Stack* stack) {
    op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::BackendSelect),
                       stack);
  }

  std::string where() const { return kernel.op + " (" + kernel.source + ")"; }

  // A kernel that called ATen compute ops the policy allows: counted, and the ops of the first such call
  // named (the text is made once, not on every call).
  void note_allowed(const std::vector<std::string>& ops) const {
    if (stats.aten_allowed.fetch_add(1, std::memory_order_relaxed) != 0) return;
    std::string text;
    for (const auto& op : ops) text += (text.empty() ? "" : ", ") + op;
    note_once(stats.aten_allowed_ops, text);
  }

  Outcome call_generated(const c10::OperatorHandle& op, c10::DispatchKeySet ks, Stack* stack) const {
    ActiveKernel frame{this, false, t_active};
    struct Restore {
      ActiveKernel* outer;
      ~Restore() { t_active = outer; }
    } restore{t_active};
    verify::NativeCallWatch watch(kernel.op, &rule.allow_aten);  // (the same watch as bbreplay's)
    t_active = &frame;
    try {
      CrashContext crash(kernel.op, kernel.source);
      kernel.kernel->function.callBoxed(op, ks, stack);
    } catch (const bb::Decline& d) {
      note_once(stats.first_decline, d.what());
      stats.declined.fetch_add(1, std::memory_order_relaxed);
      return Outcome::Declined;
    } catch (const std::exception& e) {
      stats.errors.fetch_add(1, std::memory_order_relaxed);
      note_once(stats.first_error, e.what());
      if (rule.on_error == policy::OnError::Raise) throw;
      log::warn_once("kernel-error:" + kernel.op, "generated kernel for " + where() +
                                                      " failed: " + first_line(e.what()) +
                                                      "; the native kernel ran instead (later failures are counted)");
      return Outcome::Failed;
    }
    if (!frame.reentered && watch.first().empty()) {
      if (!watch.allowed().empty()) note_allowed(watch.allowed());
      return Outcome::Routed;
    }
    stats.native_calls.fetch_add(1, std::memory_order_relaxed);
    const std::string what = frame.reentered ? kernel.op + " itself" : watch.first() + " (a compute op)";
    note_once(stats.first_native_call, what);
    log::warn_once("native:" + kernel.op, "generated kernel for " + where() + " calls " + what +
                                              "; its result was discarded and the native kernel ran");
    return Outcome::NativeCall;
  }

  void shadow(const c10::OperatorHandle& op, c10::DispatchKeySet ks, Stack* stack) const {
    const size_t base = stack->size() - nargs;
    Stack mine;
    {
      Bypass bypass;
      at::RecordFunctionGuard untraced(false);
      for (size_t k = base; k < stack->size(); ++k) mine.push_back(verify::deep_copy((*stack)[k]));
    }
    const Stack inputs(stack->begin() + base, stack->end());  // native's arguments (and the report's)
    native(op, ks, stack);                                    // the program continues with these results
    const Stack my_args = mine;                               // the same tensors the kernel gets
    if (call_generated(op, ks, &mine) != Outcome::Routed) return;
    const uint64_t call = stats.shadowed.fetch_add(1, std::memory_order_relaxed) + 1;  // compared
    Bypass bypass;
    at::RecordFunctionGuard untraced(false);
    auto tol = [this](c10::ScalarType t) { return policy::tolerance_for(*policy, rule, t); };
    const size_t outputs = stack->size() - base;
    std::optional<verify::Mismatch> m;
    if (mine.size() != outputs) {
      m = verify::Mismatch{"count", std::to_string(mine.size()) + " outputs, native gave " + std::to_string(outputs)};
    }
    if (!m) m = integrity(op.schema(), inputs, Stack(stack->begin() + base, stack->end()), my_args, mine);
    verify::ErrorStats errors;
    for (size_t k = 0; !m && k < outputs; ++k)
      m = verify::compare_values((*stack)[base + k], mine[k], tol, "output " + std::to_string(k), &errors);
    std::lock_guard<std::mutex> lock(stats.mu);
    stats.max_abs = std::max(stats.max_abs, errors.max_abs);
    stats.max_rel = std::max(stats.max_rel, errors.max_rel);
    if (!m) return;
    stats.mismatched.fetch_add(1, std::memory_order_relaxed);
    if (!stats.first_mismatch_call || call < stats.first_mismatch_call) stats.first_mismatch_call = call;
    if (stats.mismatches.size() < kMismatchesKept)
      stats.mismatches.push_back("(" + args_text(inputs) + ") " + m->detail);
  }

  // What the kernel did to memory that native does not (docs/integrity.md, shadow mode): results in its
  // inputs' or each other's memory, or arguments the schema does not let it write changed.
  static std::optional<verify::Mismatch> integrity(const c10::FunctionSchema& schema, const Stack& native_args,
                                                   const Stack& native_out, const Stack& args, const Stack& out) {
    auto found = [](verify::Flag f, const std::string& what) {
      return verify::Mismatch{verify::flag_name(f), std::string(verify::flag_name(f)) + ": " + what};
    };
    const std::string a = verify::aliasing_native_lacks(schema, native_args, native_out, args, out, out.size());
    if (!a.empty()) return found(verify::Flag::Aliasing, a + ", which native's does not");
    if (std::string arg = verify::first_unwritable_change(schema, native_args, args); !arg.empty())
      return found(verify::Flag::InputMutation, "argument '" + arg +
                                                    "', which the schema does not let the op write, "
                                                    "differs from native's after the call");
    return std::nullopt;
  }

  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

  void note_once(std::string& slot, const std::string& text) const {
    std::lock_guard<std::mutex> lock(stats.mu);
    if (slot.empty()) slot = first_line(text);
  }
};

// What start_routing set up, for the summary: the routes (owned by the dispatcher) and where they
// came from. Made at the first use and never freed (the summary is written at exit). Reached through
// routing() only.
struct Routing {
  std::mutex mu;                     // guards routes
  std::vector<const Route*> routes;  // owned by the dispatcher
  std::string backend_dir, policy_source;
  bool backend_named_by_policy = false;
  double (*python_load_seconds)() = nullptr;  // the backend's Python kernels: imports and Triton compiles
};
Routing& routing() {
  static auto* r = new Routing;
  return *r;
}

std::string impl_name(const std::string& op) {
  auto [name, overload] = trace::split_op(op);
  return trace::join_op(name.substr(name.rfind("::") + 2), overload);
}

}  // namespace

int start_routing(backends::Backend backend, policy::Policy policy, bool named_by_policy) {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return 0;
  Routing& state = routing();
  auto* kept_policy = new policy::Policy(std::move(policy));  // lives as long as the routes
  auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::BackendSelect, __FILE__, __LINE__);
  const bool implied = kept_policy->source.empty();
  int routed = 0;
  for (auto& k : backend.kernels) {
    const policy::OpPolicy* rule = kept_policy->find(k.op);
    if (!rule && !implied) continue;  // the policy narrows the backend to the ops it names
    policy::OpPolicy effective = rule ? *rule : kept_policy->defaults;
    effective.op = k.op;
    auto route = std::make_unique<Route>(k, effective, kept_policy);
    std::lock_guard<std::mutex> lock(state.mu);
    state.routes.push_back(route.get());
    lib->impl(impl_name(k.op).c_str(), torch::CppFunction::makeFromBoxedFunctor(std::move(route)));
    ++routed;
  }
  for (const auto& rule : kept_policy->ops) {
    bool found = false;
    for (const auto& k : backend.kernels) found |= k.op == rule.op;
    if (!found)
      log::warn(kept_policy->source + ":" + std::to_string(rule.line) + ": " + rule.op +
                " is in the policy but the backend has no usable kernel for it");
  }
  state.backend_dir = backend.dir;
  state.backend_named_by_policy = named_by_policy;
  state.python_load_seconds = backend.python_load_seconds;
  state.policy_source = implied ? "" : kept_policy->source;
  if (routed) install_crash_guard();
  return routed;
}

std::string routing_summary() {
  Routing& state = routing();
  std::lock_guard<std::mutex> lock(state.mu);
  if (state.routes.empty()) return "";
  std::ostringstream s;
  s << "routing summary: backend " << state.backend_dir
    << (state.backend_named_by_policy ? " (named by the policy file: its code was compiled and ran in this program)"
                                      : "")
    << (state.policy_source.empty() ? "" : ", policy " + state.policy_source) << "\n";
  s << "  " << std::left << std::setw(36) << "op" << std::right << std::setw(7) << "mode" << std::setw(10) << "calls"
    << std::setw(10) << "routed" << std::setw(10) << "declined" << std::setw(8) << "unmet" << std::setw(8) << "passed"
    << std::setw(8) << "errors" << std::setw(8) << "native" << std::setw(10) << "mismatch"
    << "\n";
  std::ostringstream notes;
  for (const Route* r : state.routes) {
    const OpStats& st = r->stats;
    s << "  " << std::left << std::setw(36) << r->kernel.op << std::right << std::setw(7)
      << policy::to_string(r->rule.mode) << std::setw(10) << st.calls.load() << std::setw(10) << st.routed.load()
      << std::setw(10) << st.declined.load() << std::setw(8) << st.unmet.load() << std::setw(8) << st.passthrough.load()
      << std::setw(8) << st.errors.load() << std::setw(8) << st.native_calls.load() << std::setw(10)
      << (r->rule.mode == policy::Mode::Shadow
              ? std::to_string(st.mismatched.load()) + "/" + std::to_string(st.shadowed.load())
              : "-")
      << "\n";
    std::lock_guard<std::mutex> lock(r->stats.mu);
    if (!st.first_error.empty()) notes << "  " << r->kernel.op << ": first error: " << st.first_error << "\n";
    if (!st.first_decline.empty()) notes << "  " << r->kernel.op << ": first decline: " << st.first_decline << "\n";
    if (!st.first_native_call.empty())
      notes << "  " << r->kernel.op << ": kernel calls " << st.first_native_call << "\n";
    if (st.aten_allowed.load())
      notes << "  " << r->kernel.op << ": kernel calls ATen compute ops, as the policy allows (allow_aten), in "
            << st.aten_allowed.load() << " calls: " << st.aten_allowed_ops << "\n";
    for (const auto& m : st.mismatches) notes << "  " << r->kernel.op << " shadow mismatch " << m << "\n";
    if (r->rule.mode == policy::Mode::Shadow && st.shadowed.load())
      notes << "  " << r->kernel.op << ": shadow largest error: abs " << st.max_abs << ", rel " << st.max_rel
            << "; first out of tolerance: "
            << (st.first_mismatch_call ? "compared call " + std::to_string(st.first_mismatch_call) : "none") << "\n";
  }
  s << "  (unmet: the policy's condition was false; passed: meta/fake/sparse/quantized inputs; native: the "
       "kernel called the op it replaces or another compute op, and native ran)\n";
  // (a Triton backend compiles on each kernel's first call of each shape and dtype, inside the program's
  // steps: said, so that a slow first step is not taken for slow kernels)
  if (state.python_load_seconds)
    if (const double seconds = state.python_load_seconds(); seconds > 0)
      notes << "  Python kernels: " << std::fixed << std::setprecision(2) << seconds
            << " s importing their files and in Triton's compiler (first calls, inside the routed calls)\n";
  return s.str() + notes.str();
}

}  // namespace bb::shim
