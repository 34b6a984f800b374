#include "replay/runner.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "bb/kernel.h"
#include "policy/compare.h"
#include "policy/native_watch.h"
#include "replay/cuda_timer.h"
#include "replay/integrity.h"
#include "replay/random_judge.h"
#include "replay/spent.h"
#include "replay/trace_summary.h"
#include "tracer/names.h"

namespace bb::replay {
namespace {


CaseResult with_status(CaseResult r, Status s, const std::string& why) {
  r.status = s;
  r.message = why;
  return r;
}

Values copies(const Values& inputs) {
  Spent spent(phase::kInputs);
  Values out;
  for (const auto& v : inputs) out.push_back(deep_copy(v));
  return out;
}

void synchronize(c10::Device d) {
  if (d.is_cuda()) c10::impl::getDeviceGuardImpl(c10::kCUDA)->synchronizeDevice(d.has_index() ? d.index() : 0);
}

bool written(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

// The call's results: its outputs, then the arguments the schema lets it write (in-place, out=).
Values results(const c10::OperatorHandle& op, const Values& args, const torch::jit::Stack& outputs) {
  Values r(outputs.begin(), outputs.end());
  const auto& params = op.schema().arguments();
  for (size_t i = 0; i < params.size() && i < args.size(); ++i)
    if (written(params[i])) r.push_back(args[i]);
  return r;
}

int g_phase_fd = -1;
std::string g_phase_prefix;

// The device type a tensor of the call was traced on when it is not `device`'s ("" when none is).
std::string traced_elsewhere(const trace::TraceEntry& entry, c10::Device device) {
  const std::string here = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  for (const auto& a : entry.args)
    for (const auto& t : a.tensors)
      if (t && t->device.substr(0, t->device.find(':')) != here) return t->device;
  return "";
}

// Says whose code runs next (report_phases_to); outside any timed region.
void note_phase(const backends::LoadedKernel* kernel) {
  if (g_phase_fd < 0) return;
  const std::string line = g_phase_prefix + (kernel ? "kernel\n" : "native\n");
  if (::write(g_phase_fd, line.data(), line.size()) < 0) g_phase_fd = -1;  // (the parent is gone)
}

// The kernel under test handed work to ATen (the native-call watch saw a compute op, or its own op,
// on one of its calls). `phase`: which call (its first, a warm-up, a timed repetition, ...).
struct NativeCallSeen : std::runtime_error {
  NativeCallSeen(const std::string& op, const std::string& phase)
      : std::runtime_error("the kernel called " + op + " (" + phase + "): ATen did the work (only allocation, "
                           "view, copy and fill ops other than the kernel's own are allowed)") {}
};

// Runs native (kernel == null) or the kernel under test on `args`, which the call may write. Every
// call of the kernel is watched for native calls: one throws NativeCallSeen, unless `seen` is given
// (then it holds the op, "" if none: for callers that must not be unwound mid-measurement). `timed`:
// native is entered at its backend kernel, as the kernel under test is (the dispatcher's autograd
// and view layers would otherwise be charged to native alone). `sync` false: return as soon as the
// call returns (the CUDA timer finds out what it left running).
Values call(const c10::OperatorHandle& op, const backends::LoadedKernel* kernel, const Values& args,
            c10::Device device, const std::string& phase, bool timed = false, bool sync = true,
            std::string* seen = nullptr) {
  if (!timed) note_phase(kernel);  // (timed runs say it before their clock starts)
  // (the timed runs' time is charged by their caller, outside the clock)
  std::optional<Spent> spent;
  if (!timed) spent.emplace(kernel ? phase::kKernel : phase::kNative);
  torch::jit::Stack stack(args.begin(), args.end());
  const c10::DispatchKeySet backend(device.is_cuda() ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU);
  if (kernel) {
    std::string first;
    {
      policy::NativeCallWatch watch(kernel->op);
      kernel->kernel->function.callBoxed(op, backend, &stack);
      first = watch.first();
    }
    if (seen) *seen = first;
    else if (!first.empty()) throw NativeCallSeen(first, phase);
  } else if (timed) {
    op.redispatchBoxed(backend, &stack);
  } else {
    op.callBoxed(&stack);
  }
  if (sync) synchronize(device);
  return results(op, args, stack);
}

// Whether the op's results are new memory that nothing else sees: no return aliases an argument and
// no argument is written (not in-place, not out=, not a view).
bool functional(const c10::FunctionSchema& s) {
  for (const auto& r : s.returns())
    if (r.alias_info()) return false;
  for (const auto& a : s.arguments())
    if (a.alias_info() && a.alias_info()->isWrite()) return false;
  return true;
}

// Strides must agree where they mean something (dimensions longer than 1).
std::string stride_mismatch(const Values& native, const Values& generated) {
  for (size_t k = 0; k < native.size() && k < generated.size(); ++k) {
    if (!native[k].isTensor() || !generated[k].isTensor()) continue;
    const at::Tensor &n = native[k].toTensor(), &g = generated[k].toTensor();
    if (!n.defined() || !g.defined() || n.sizes() != g.sizes()) continue;
    for (int64_t d = 0; d < n.dim(); ++d) {
      if (n.size(d) > 1 && n.stride(d) != g.stride(d)) {
        std::ostringstream s;
        s << "result " << k << " has strides " << g.strides() << ", native " << n.strides();
        return s.str();
      }
    }
  }
  return "";
}

// Which arguments a call changed although the schema does not let the op write them.
std::vector<bool> changed_args(const c10::OperatorHandle& op, const Values& before, const Values& after) {
  Spent spent(phase::kIntegrity);
  const auto& params = op.schema().arguments();
  std::vector<bool> out(params.size(), false);
  for (size_t i = 0; i < params.size() && i < before.size(); ++i)
    out[i] = !written(params[i]) && !policy::identical(before[i], after[i]);
  return out;
}

// The first argument the kernel changed that neither the schema nor native's own behaviour allows.
std::string mutated_inputs(const c10::OperatorHandle& op, const Values& before, const Values& after,
                           const std::vector<bool>& native_wrote) {
  const std::vector<bool> changed = changed_args(op, before, after);
  for (size_t i = 0; i < changed.size(); ++i)
    if (changed[i] && !native_wrote[i]) return op.schema().arguments()[i].name();
  return "";
}

// Ops whose outputs hold whatever was in memory (empty, empty_like, resize_, ...): only their shapes,
// dtypes and strides can be compared.
bool uninitialized_output(const c10::OperatorHandle& op) {
  const std::string name = op.schema().name();
  return name.find("empty") != std::string::npos || name == "aten::resize_" || name == "aten::resize_as_" ||
         name == "aten::_resize_output_";
}

// ------------------------------------------------------------------ timing

// clflushopt, where the CPU has it (CPUID leaf 7, EBX bit 23), flushes the lines of one tensor without
// ordering each flush after the previous one: 3-4x fewer cycles per line than clflush. Either is
// ordered by the mfence that ends evict().
#if defined(__x86_64__) || defined(__i386__)
bool has_clflushopt() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
  }();
  return has;
}

__attribute__((target("clflushopt"))) void flush_lines_unordered(const char* q, const char* end) {
  for (; q < end; q += 64) _mm_clflushopt(const_cast<char*>(q));
}
#endif

void flush_lines(const char* q, const char* end) {
#if defined(__x86_64__) || defined(__i386__)
  if (has_clflushopt()) return flush_lines_unordered(q, end);
  for (; q < end; q += 64) _mm_clflush(q);
#elif defined(__aarch64__)
  for (; q < end; q += 64) asm volatile("dc civac, %0" ::"r"(q) : "memory");
#endif
}

// Evicts the memory of every tensor in `values` from every cache level (x86 clflushopt or clflush), so that each
// timed run reads its operands from memory, without making the code, the allocator and the page
// tables cold as well: flushing the whole 260 MB last-level cache of the development host made an
// empty relu cost 90 µs instead of 1 µs, which would have drowned every small kernel.
void evict_tensor(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || !t.has_storage()) return;
  const auto* p = static_cast<const char*>(t.storage().data());
  if (!p) return;
  const size_t line = 64;
  flush_lines(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) & ~(line - 1)), p + t.storage().nbytes());
}

void evict(const Values& values) {
  for (const auto& v : values) {
    if (v.isTensor()) evict_tensor(v.toTensor());
    if (v.isList())
      for (const auto& e : v.toListRef())
        if (e.isTensor()) evict_tensor(e.toTensor());
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_mfence();
#elif defined(__aarch64__)
  asm volatile("dsb sy" ::: "memory");
#endif
}

Timing summarize(std::vector<double> samples, std::vector<double> events = {}) {
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return samples[static_cast<size_t>(q * (samples.size() - 1) + 0.5)]; };
  Timing t{at(0.5), at(0.25), at(0.75), samples.front(), static_cast<int>(samples.size())};
  if (!events.empty()) {
    std::sort(events.begin(), events.end());
    t.events_median = events[events.size() / 2];
  }
  return t;
}

// This worker's CUDA timer, made on first use; null (with the reason) where CUPTI is unusable.
CudaTimer* cuda_timer(const c10::Device& device, std::string* why) {
  static std::unique_ptr<CudaTimer> timer;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    timer = make_cuda_timer(device.has_index() ? device.index() : 0, "", &error);
  }
  *why = error;
  return timer.get();
}

std::string compare(const c10::OperatorHandle& op, const Values& inputs, const Values& native, const Values& generated,
                    const RunOptions& o, CaseResult& r);

// An integrity flag raised while timing (CUDA: escaped work, environment changes, library kernels).
struct TimedFlag : std::runtime_error {
  TimedFlag(std::string flag, const std::string& what) : std::runtime_error(what), flag(std::move(flag)) {}
  std::string flag;
};

// A timed repetition whose result did not match native's on the same inputs. `cached`: it was bitwise
// the kernel's result for other inputs.
struct RepetitionMismatch : std::runtime_error {
  RepetitionMismatch(const std::string& what, bool cached) : std::runtime_error(what), cached(cached) {}
  bool cached;
};

// Whether the median of `samples` is known to within `precision` of it: the half-width of its
// distribution-free 95% confidence interval, [x(k), x(n+1-k)] of the sorted samples with the largest k
// whose coverage 1 - 2 P(Binomial(n, 1/2) < k) is at least 95% (six samples at least).
bool known_within(std::vector<double> samples, double precision) {
  const size_t n = samples.size();
  if (n < 6) return false;
  std::sort(samples.begin(), samples.end());
  size_t k = 0;  // P(Binomial(n, 1/2) <= j), summed as j grows
  double below = 0, term = std::ldexp(1.0, -static_cast<int>(n));  // C(n, 0) / 2^n
  for (size_t j = 0; j < n / 2; ++j) {
    below += term;
    if (1 - 2 * below < 0.95) break;
    k = j + 1;
    term = term * static_cast<double>(n - j) / static_cast<double>(j + 1);
  }
  if (k == 0) return false;
  const double median = samples[n / 2], half = (samples[n - k] - samples[k - 1]) / 2;
  return median > 0 && half <= precision * median;
}

// Why a case's times are no evidence of speed, or "": a side whose interquartile range is wider than
// its median (bimodal or noisy samples: another process, clock changes, a busy GPU), or fewer than
// five samples.
std::string unstable(const Timing& native, const Timing& generated) {
  for (const auto& [who, t] : {std::pair<const char*, const Timing&>{"native", native}, {"the kernel", generated}}) {
    std::ostringstream s;
    if (t.samples < 5) {
      s << who << " has " << t.samples << " timed samples (fewer than 5)";
      return s.str();
    }
    if (t.q3 - t.q1 > t.median) {
      s << who << "'s interquartile range (" << t.q1 << " to " << t.q3 << " us) is wider than its median (" << t.median
        << " us)";
      return s.str();
    }
  }
  return "";
}

// Input values for a case. On CUDA drawn on the device by its own generator: a case makes up to 30
// input sets, and drawn on the host (then copied) the optimizer's lists of every parameter of GPT-2
// small took 8-40 s a case on the H200 (2026-12-01). On the CPU where drawing on the device fails.
// Throws std::invalid_argument where the variant does not apply.
Values inputs_for(const BoundCall& bound, const RunOptions& o, uint64_t seed, const std::string& variant) {
  if (o.device.is_cuda()) {
    try {
      return make_inputs(bound, {o.device, seed, variant, true});
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const std::exception&) {  // (drawn on the CPU below)
    }
  }
  return make_inputs(bound, {o.device, seed, variant, false});
}

// Native's and the kernel's times, or why the case has none although both ran (`not_timed`).
struct Times {
  Timing native, generated;
  std::string not_timed;
};

// Native and the kernel under test, interleaved (alternating which goes first), with their operands
// evicted from the caches. Every run pair gets an input set of its own (its own seed; each side runs
// on its own copy of it), and the kernel's result is checked against native's on it (outside the
// timed region), so a kernel cannot be right once and then cached or wrong in the loop: no inputs
// repeat, so a cache keyed on addresses, shapes or values never hits.
Times time_both(const BoundCall& bound, const std::string& variant, const backends::LoadedKernel* kernel,
                const RunOptions& o, const CaseResult& r) {
  std::vector<double> native, generated, native_events, generated_events;
  int native_activities = 0, generated_activities = 0;  // CUDA: kernels, copies and sets seen, all runs
  Findings native_findings, generated_findings;
  std::string why_not;
  CudaTimer* timer = o.device.is_cuda() ? cuda_timer(o.device, &why_not) : nullptr;
  // No device timing in this worker (CUPTI unusable): the case stays checked, just not timed.
  if (o.device.is_cuda() && !timer) return {{}, {}, "no device timing: " + why_not};
  // Both sides run the same way; the kernel's watch (a thread-local RecordFunction callback, see
  // call()) costs it nothing unless it calls ATen ops, and then 0.1-0.35 us each (docs/performance.md).
  auto run = [&](const backends::LoadedKernel* which, const Values& inputs, std::vector<double>& out,
                 const std::string& phase) {
    Values args = copies(inputs);
    Values result;
    std::string seen;
    note_phase(which);
    if (timer) {
      std::optional<Spent> evicting(phase::kEvict);  // the timer's eviction, synchronization and CUPTI flush
      CudaSample s = timer->time([&] {
        Spent timed(phase::kTimed);
        result = call(bound.op, which, args, o.device, phase, true, false, &seen);
      });
      evicting.reset();
      if (!seen.empty()) throw NativeCallSeen(seen, phase);
      const bool is_native = &out == &native;  // (in the self-check both sides are native code)
      out.push_back(s.device_us);
      (is_native ? native_events : generated_events).push_back(s.events_us);
      (is_native ? native_activities : generated_activities) += s.activities;
      Findings& found = is_native ? native_findings : generated_findings;
      if (found.escaping.empty()) found.escaping = s.findings.escaping;
      if (found.tampering.empty()) found.tampering = s.findings.tampering;
      if (found.library.empty()) found.library = s.findings.library;
      return result;
    }
    std::optional<Spent> evicting(phase::kEvict);
    evict(args);
    synchronize(o.device);
    evicting.reset();
    Spent timed(phase::kTimed);  // (its clock readings are outside the host clock's)
    // The watch's callback is added before the clock starts: the timed call pays only the callback's
    // cost on each ATen op the kernel itself calls (bench/watch_overhead.cpp). (Not on CUDA: the
    // timer's own eviction calls ATen, and host time is not what is measured there.)
    std::optional<policy::NativeCallWatch> around;
    if (which) around.emplace(which->op);
    auto t0 = std::chrono::steady_clock::now();
    result = call(bound.op, which, args, o.device, phase, true, true, &seen);  // synchronizes before returning
    out.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    around.reset();
    if (!seen.empty()) throw NativeCallSeen(seen, phase);
    return result;
  };
  Values previous;  // the kernel's (correct) result on the previous pair's inputs
  double making_inputs = 0;  // seconds spent making inputs: not part of the budget
  auto pair = [&](int rep, bool native_first) {
    // (seeds 7919·k apart from the checks' own; warm-ups are rep -2 and -1)
    const auto made = std::chrono::steady_clock::now();
    const uint64_t seed = o.seed + 7919 * static_cast<uint64_t>(rep + 3);
    const Values inputs = inputs_for(bound, o, seed, variant);
    making_inputs += std::chrono::duration<double>(std::chrono::steady_clock::now() - made).count();
    const std::string phase = rep < 0 ? "a warm-up run" : "timed repetition " + std::to_string(rep + 1);
    Values expected, got;
    if (native_first) {
      expected = run(nullptr, inputs, native, phase);
      got = run(kernel, inputs, generated, phase);
    } else {
      got = run(kernel, inputs, generated, phase);
      expected = run(nullptr, inputs, native, phase);
    }
    if (!o.check) return;
    CaseResult scratch = r;
    const std::string why = compare(bound.op, inputs, expected, got, o, scratch);
    if (why.empty()) {
      previous = copies(got);
      return;
    }
    const bool cached = !previous.empty() && bitwise_equal(previous, got);
    throw RepetitionMismatch((rep < 0 ? std::string("warm-up run: ") : "timed repetition " + std::to_string(rep + 1) + ": ") +
                                 (cached ? "the kernel returned exactly its result for other inputs: " : "") + why,
                             cached);
  };
  for (int w = -2; w < 0; ++w) pair(w, true);  // warm-up: first-call costs are not the kernel's
  // A call that launched no device work on either side, twice each (views, metadata, shape queries):
  // there is nothing to time, and timing it would only measure the timer.
  const bool no_device_work = timer && native_activities == 0 && generated_activities == 0;
  native.clear();
  generated.clear();
  native_events.clear();
  generated_events.clear();
  const auto start = std::chrono::steady_clock::now();
  making_inputs = 0;
  // Enough once both medians are known to within `precision` (the fast, steady kernels of a GPU: 6
  // pairs, not 25). Samples that are no evidence of speed yet (unstable(): a busy machine, a clock
  // change) get more repetitions, up to four times those asked for (when five or more were), within
  // the budget: noise is outwaited, not reported.
  const int most = 4 * o.repetitions;
  for (int rep = 0; rep < most && !no_device_work; ++rep) {
    if (o.precision > 0 && known_within(native, o.precision) && known_within(generated, o.precision)) break;
    if (rep >= o.repetitions && (o.repetitions < 5 || unstable(summarize(native), summarize(generated)).empty())) break;
    pair(rep, rep % 2 == 0);
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - making_inputs;
    if (rep >= 4 && spent > o.budget_seconds) break;
  }
  // A kernel is accused only of what native itself does not do here; native against native (the
  // self-check) is accused of anything, so that a check that fires on honest work shows there.
  const Findings& n = native_findings;
  const Findings& g = generated_findings;
  if (!g.escaping.empty() && (!kernel || n.escaping.empty())) throw TimedFlag("escaping-work", g.escaping);
  if (!g.tampering.empty() && (!kernel || n.tampering.empty()))
    throw TimedFlag("environment-tampering", g.tampering);
  if (kernel && !g.library.empty())
    throw TimedFlag("native-call", g.library + ": a vendor library did the work of the op the kernel implements");
  if (no_device_work)
    return {{}, {}, "no device work: neither native nor the kernel launched a kernel, copy or set in two runs each"};
  return {summarize(native, native_events), summarize(generated, generated_events), ""};
}

// Bytes of the results' storage: what the call must at least write.
double result_bytes(const Values& results) {
  double bytes = 0;
  std::set<const void*> seen;
  for (const auto& v : results) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.has_storage() || !seen.insert(t.storage().data()).second) continue;
    bytes += static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
  }
  return bytes;
}

// Memory to have free and poisoned (CUDA) before a kernel runs: twice its results, plus room for scratch.
size_t poison_reserve(const Values& native_results) {
  return static_cast<size_t>(2 * result_bytes(native_results)) + (size_t{4} << 20);
}

policy::Tolerance tolerance(const RunOptions& o, const std::string& op, c10::ScalarType t) {
  if (!o.policy) return policy::default_tolerance(t);
  const policy::OpPolicy* rule = o.policy->find(op);
  return policy::tolerance_for(*o.policy, rule ? *rule : o.policy->defaults, t);
}

bool low_precision_float(const at::Tensor& t) {
  return t.defined() && t.is_floating_point() && t.scalar_type() != at::kDouble;
}

// Native on copies of the inputs whose floating-point tensors `convert` has changed; empty when native
// cannot run so. The float64 reference, the lower-precision run and the reduction allowance are made
// this way.
Values native_on(const c10::OperatorHandle& op, const Values& inputs, c10::Device device,
                 const std::function<at::Tensor(const at::Tensor&)>& convert) {
  Spent spent(phase::kReference, true);
  Values args;
  for (const auto& v : inputs) {
    c10::IValue c = deep_copy(v);
    if (c.isTensor() && c.toTensor().defined() && c.toTensor().is_floating_point()) c = convert(c.toTensor());
    args.push_back(std::move(c));
  }
  try {
    return call(op, nullptr, args, device, "");
  } catch (const std::exception&) {
    return {};
  }
}

// The op run natively on the inputs with every float32/float16/bfloat16 tensor in float64; empty when
// the op cannot (then results are judged against native alone).
Values float64_reference(const c10::OperatorHandle& op, const Values& inputs, c10::Device device) {
  return native_on(op, inputs, device, [](const at::Tensor& t) { return t.to(at::kDouble); });
}

// The unit roundoff (half the distance from 1 to the next value) of the precision a correct kernel
// accumulates a result of type `t` in: float32 for float32, float16 and bfloat16 results (as ATen
// does: a sum accumulated in bfloat16 is wrong, not differently rounded), float64 for float64.
double accumulation_roundoff(c10::ScalarType t) {
  return t == at::kDouble ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}

// The rounding error that a correct computation of result k in its own dtype may make in another
// order than native's (docs/replay.md): Higham and Mary's probabilistic bound for sums and dot
// products, sqrt(K) u sum|terms|, with u the accumulation's unit roundoff, K the input elements per result
// element (of the largest floating-point input) and sum|terms| the op in float64 on the absolute
// values of its inputs. Undefined where each result element comes from one input element (K <= 1:
// elementwise ops keep their own tolerance) or where the op cannot run on absolute values.
// `on_abs` keeps the op's run on absolute values for the call's other results (made once, when needed).
at::Tensor rounding_allowance(const c10::OperatorHandle& op, const Values& inputs, size_t k, const at::Tensor& result,
                              c10::Device device, std::optional<Values>& on_abs) {
  if (!result.defined() || result.numel() == 0 || !result.is_floating_point()) return {};
  int64_t largest = 0;
  for (const at::Tensor& t : policy::tensors_of(inputs))
    if (t.is_floating_point()) largest = std::max(largest, t.numel());
  const double terms = static_cast<double>(largest) / static_cast<double>(result.numel());
  if (terms <= 1) return {};
  if (!on_abs) on_abs = native_on(op, inputs, device, [](const at::Tensor& t) { return t.abs().to(at::kDouble); });
  const Values& out = *on_abs;
  if (k >= out.size() || !out[k].isTensor() || out[k].toTensor().sizes() != result.sizes()) return {};
  return out[k].toTensor().abs() * (std::sqrt(terms) * accumulation_roundoff(result.scalar_type()));
}

// The op run natively with its floating-point inputs in `lower`, its result k in `from`; undefined
// when the op cannot.
at::Tensor native_in(const c10::OperatorHandle& op, const Values& inputs, size_t k, c10::ScalarType lower,
                     c10::ScalarType from, c10::Device device) {
  const Values out = native_on(op, inputs, device, [&](const at::Tensor& t) { return t.to(lower); });
  if (k < out.size() && out[k].isTensor() && out[k].toTensor().defined()) return out[k].toTensor().to(from);
  return {};
}

// A wrong result that a lower precision explains, and only then (docs/integrity.md): within that
// precision's tolerance of the float64 reference, and either its values are values of that precision
// (rounded through it) or it equals, to its own dtype's tolerance, native's result computed in it.
// The precision and which of the two showed it; nullopt for a plain wrong answer.
std::optional<std::pair<c10::ScalarType, std::string>> computed_in_lower_precision(
    const c10::OperatorHandle& op, const Values& inputs, size_t k, const at::Tensor& actual, const at::Tensor& ref,
    policy::Tolerance own, const RunOptions& o) {
  for (c10::ScalarType lower : lower_precisions(actual.scalar_type())) {
    if (!within_tolerance_of(actual, ref, lower)) continue;
    if (rounded_through(actual, ref, lower))
      return std::make_pair(lower, "its values are " + names::dtype(lower) + " values");
    const at::Tensor lowered = native_in(op, inputs, k, lower, actual.scalar_type(), o.device);
    if (lowered.defined() && lowered.sizes() == actual.sizes() && !policy::compare_tensors(lowered, actual, own))
      return std::make_pair(lower, "it equals native's result with " + names::dtype(lower) + " inputs");
  }
  return std::nullopt;
}

// Strides that differ from native's: a failure for in-place, out= and view results (the caller sees
// that memory) and with strict_strides (policy or --strict-strides); otherwise a note, since a fresh
// result in another layout is a correct result for every consumer of a functional op.
std::string layout_mismatch(const c10::OperatorHandle& op, const Values& native, const Values& generated,
                            const RunOptions& o, CaseResult& r) {
  const std::string why = stride_mismatch(native, generated);
  if (why.empty()) return "";
  const policy::OpPolicy* rule = o.policy ? o.policy->find(r.op) : nullptr;
  const bool strict = o.strict_strides || (rule ? rule->strict_strides : o.policy && o.policy->defaults.strict_strides);
  if (strict || !functional(op.schema())) return why;
  r.message += std::string(r.message.empty() ? "" : "; ") + "layout differs from native's (passes: a functional op; "
               "--strict-strides fails it): " + why;
  return "";
}

// Elements of native's results that hold whatever the memory held before the call (cuDNN attention's
// RNG seed and offset when it has no dropout): native twice on the same inputs, its new memory poisoned
// differently each time. Nothing defines them: they are compared nowhere, and a kernel that leaves
// them unwritten too is not flagged. Only asked after a mismatch: honest cases never pay for it.
ElementMasks native_unwritten(const c10::OperatorHandle& op, const Values& inputs, const RunOptions& o) {
  try {
    Values a_args = copies(inputs), b_args = copies(inputs), a, b;
    {
      PoisonScope poison(kPoisonA, o.device);
      a = call(op, nullptr, a_args, o.device, "");
    }
    {
      PoisonScope poison(kPoisonB, o.device, poison_reserve(a));
      b = call(op, nullptr, b_args, o.device, "");
    }
    Spent spent(phase::kIntegrity);
    return differing_elements(a, b);
  } catch (const std::exception&) {
    return {};
  }
}

// Result `k` compared again without the elements native leaves unwritten, if it has any: nullopt
// when they were the whole difference.
std::optional<policy::Mismatch> compare_written(const at::Tensor& n, const at::Tensor& g, const ElementMasks& undefined,
                                                size_t k, const policy::ToleranceFn& tol, const std::string& path,
                                                policy::ErrorStats* errors, std::string* note) {
  if (k >= undefined.size() || undefined[k].empty() || !undefined[k][0].defined() || n.sizes() != g.sizes())
    return policy::Mismatch{};
  const at::Tensor mask = undefined[k][0].to(n.device());
  auto m = policy::compare_values(n.clone().masked_fill_(mask, 0), g.clone().masked_fill_(mask, 0), tol, path, errors);
  if (!m)
    *note = path + ": " + std::to_string(mask.sum().item<int64_t>()) + " of " + std::to_string(mask.numel()) +
            " elements not compared (native leaves them unwritten: they hold what the memory held)";
  return m;
}

// Compares the results; fills the errors and tolerance of `r`. Returns the failure, or "".
std::string compare(const c10::OperatorHandle& op, const Values& inputs, const Values& native, const Values& generated,
                    const RunOptions& o, CaseResult& r) {
  Spent spent(phase::kCompare);
  if (native.size() != generated.size())
    return std::to_string(generated.size()) + " results, native gave " + std::to_string(native.size());
  auto tol = [&](c10::ScalarType t) { return tolerance(o, r.op, t); };
  for (const auto& v : native) {  // the tolerance reported: the first tensor result's
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const policy::Tolerance t = tol(v.toTensor().scalar_type());
    r.rtol = t.rtol, r.atol = t.atol;
    break;
  }
  if (uninitialized_output(op)) {
    r.message = "values not compared: the op leaves its output uninitialized";
    for (size_t k = 0; k < native.size(); ++k) {
      if (!native[k].isTensor() || !generated[k].isTensor()) continue;
      auto m = policy::compare_tensors(native[k].toTensor(), generated[k].toTensor(), {INFINITY, INFINITY});
      if (m && m->what != "values") return "result " + std::to_string(k) + ": " + m->detail;
    }
    return layout_mismatch(op, native, generated, o, r);
  }
  std::optional<Values> reference, on_abs;  // made only when some floating-point result needs them
  policy::ErrorStats errors;
  struct Keep {  // the errors are the case's whichever way compare returns
    CaseResult& r;
    policy::ErrorStats& e;
    ~Keep() {
      r.max_abs_error = std::max(r.max_abs_error, e.max_abs);
      r.max_rel_error = std::max(r.max_rel_error, e.max_rel);
    }
  } keep{r, errors};
  std::optional<ElementMasks> undefined;  // made on the first mismatch
  for (size_t k = 0; k < native.size(); ++k) {
    const std::string path = "result " + std::to_string(k);
    policy::ErrorStats these;
    auto m = policy::compare_values(native[k], generated[k], tol, path, &these);
    if (m && m->what == "values" && native[k].isTensor() && generated[k].isTensor()) {
      if (!undefined) undefined = native_unwritten(op, inputs, o);
      std::string note;
      policy::ErrorStats written;
      if (!compare_written(native[k].toTensor(), generated[k].toTensor(), *undefined, k, tol, path, &written, &note)) {
        m.reset();
        these = written;
        r.message += std::string(r.message.empty() ? "" : "; ") + note;
      }
    }
    errors.add(these.max_abs, these.max_rel);
    if (!m) continue;
    const bool second_chance = m->what == "values" && native[k].isTensor() && low_precision_float(native[k].toTensor());
    if (!second_chance) return m->detail;
    if (!reference) reference = float64_reference(op, inputs, o.device);
    if (k >= reference->size() || !(*reference)[k].isTensor()) return m->detail;
    const at::Tensor& n = native[k].toTensor();
    const at::Tensor& ref = (*reference)[k].toTensor();
    const at::Tensor rounding = rounding_allowance(op, inputs, k, n, o.device, on_abs);
    if (auto m2 = policy::compare_with_reference(n, generated[k].toTensor(), ref, tol(n.scalar_type()), rounding)) {
      if (auto lower = computed_in_lower_precision(op, inputs, k, generated[k].toTensor(), ref, tol(n.scalar_type()), o)) {
        r.flags.push_back("precision-downgrade");
        return "result " + std::to_string(k) + ": computed in " + names::dtype(lower->first) + ", not " +
               names::dtype(n.scalar_type()) + " (" + lower->second + "): " + m2->detail;
      }
      return "result " + std::to_string(k) + ": " + m2->detail;
    }
    r.message = "outside tolerance of native, but no less accurate than native against a float64 reference";
  }
  return layout_mismatch(op, native, generated, o, r);
}

// Outputs sharing memory with inputs or with each other where native's do not.
std::string new_aliasing(const c10::OperatorHandle& op, const Values& native_args, const Values& native,
                         const Values& args, const Values& generated, size_t outputs) {
  Spent spent(phase::kIntegrity);
  const std::string a = policy::aliasing_native_lacks(op.schema(), native_args, native, args, generated, outputs);
  return a.empty() ? "" : a + ", which native's does not (a result must not be, or be inside, an input)";
}

// After a failed comparison: the kernel again on the same inputs with the memory it is given poisoned
// differently. Elements that changed with the poison were never written.
std::string unwritten(const BoundCall& bound, const backends::LoadedKernel* kernel, const Values& inputs,
                      const Values& first, const RunOptions& o) {
  try {
    Values args = copies(inputs), again;
    {
      PoisonScope poison(kPoisonB, o.device, poison_reserve(first));
      again = call(bound.op, kernel, args, o.device, "its unwritten-output re-run");
    }
    if (unwritten_elements(first, again).empty()) return "";
    return unwritten_elements(first, again, native_unwritten(bound.op, inputs, o));
  } catch (const NativeCallSeen&) {
    throw;
  } catch (const std::exception&) {
    return "";
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
// data pointer, a constant result or a buffer reused across calls shows here.
std::string second_input_set(const BoundCall& bound, const std::string& variant, const backends::LoadedKernel* kernel,
                             Values& args, const Values& first, size_t outputs, const RunOptions& o, CaseResult& r) {
  const Values inputs2 = inputs_for(bound, o, o.seed + 1000003, variant);
  Values native_args2 = copies(inputs2);
  Values native2 = call(bound.op, nullptr, native_args2, o.device, "");
  Values kept;
  for (size_t k = 0; k < outputs && k < first.size(); ++k) kept.push_back(deep_copy(first[k]));
  refill(args, inputs2);
  Values generated2;
  {
    PoisonScope poison(kPoisonA, o.device, poison_reserve(native2));
    generated2 = call(bound.op, kernel, args, o.device, "its call on a second set of input values");
  }
  Values n2(native2.begin(), native2.begin() + std::min(outputs, native2.size()));
  Values g2(generated2.begin(), generated2.begin() + std::min(outputs, generated2.size()));
  CaseResult scratch = r;
  if (std::string why = compare(bound.op, inputs2, n2, g2, o, scratch); !why.empty()) {
    if (bitwise_equal(kept, g2)) {
      r.flags.push_back("cached-result");
      return "on new input values in the same memory the kernel returned exactly its previous result "
             "(a result cached or replayed, not computed): " + why;
    }
    return "wrong on a second set of input values: " + why;
  }
  // (results that are inputs, as in-place ops return them, are in the same memory by design)
  if (aliasing(bound.op.schema(), args, generated2, outputs).empty() && shares_storage(first, generated2, outputs)) {
    r.flags.push_back("aliasing");
    return "the kernel returned the memory of its previous call's result again (a buffer reused across calls)";
  }
  return "";
}

// The checks after the kernel's first call, in the order a cheat would be caught: "" when they pass,
// else why it failed (with its flag in `r`). `native` and `generated` gain the arguments native
// changed although the schema does not say so.
std::string check(const BoundCall& bound, const std::string& variant, const backends::LoadedKernel* kernel,
                  const Values& inputs, Values& native, const Values& native_args, Values& args, Values& generated,
                  const RunOptions& o, CaseResult& r) {
  // Arguments native changed although the schema does not say so (batch_norm's running stats) are
  // results too; a kernel must change them the same way.
  const std::vector<bool> native_wrote = changed_args(bound.op, inputs, native_args);
  for (size_t i = 0; i < native_wrote.size(); ++i)
    if (native_wrote[i]) native.push_back(native_args[i]), generated.push_back(args[i]);
  if (std::string arg = mutated_inputs(bound.op, inputs, args, native_wrote); !arg.empty()) {
    r.flags.push_back("input-mutation");
    return "the kernel changed input '" + arg + "', which the schema does not let it write";
  }
  const size_t outputs = bound.op.schema().returns().size();
  if (std::string why = new_aliasing(bound.op, native_args, native, args, generated, outputs); !why.empty()) {
    r.flags.push_back("aliasing");
    return why;
  }
  if (std::string why = compare(bound.op, inputs, native, generated, o, r); !why.empty()) {
    if (std::string u = unwritten(bound, kernel, inputs, generated, o); !u.empty()) {
      r.flags.push_back("unwritten-output");
      why = u;
    }
    return why;
  }
  // (in the self-check too: native must pass every integrity check, or the checks accuse wrongly)
  try {
    return second_input_set(bound, variant, kernel, args, generated, outputs, o, r);
  } catch (const bb::Decline&) {
    return "";  // declining other values is the kernel's right; the check did not happen
  } catch (const NativeCallSeen&) {
    throw;
  } catch (const std::exception& e) {
    return std::string("the kernel raised on a second set of input values: ") + e.what();
  }
}

// Times both sides (time_both) and judges the times: "" or why the case failed while being timed.
std::string time_case(const BoundCall& bound, const std::string& variant, const backends::LoadedKernel* kernel,
                      const Values& generated, const RunOptions& o, CaseResult& r) {
  try {
    auto [n, g, not_timed] = time_both(bound, variant, kernel, o, r);
    if (!not_timed.empty()) {
      r.message = "not timed: " + not_timed;
      return "";
    }
    r.native = n;
    r.generated = g;
    r.unstable = unstable(n, g);
    // Four times faster than writing its results at the copy bandwidth this device reached: not to be
    // trusted. (Not closer: results smaller than L2 can be written into it faster than to memory.)
    std::string no_timer;
    if (CudaTimer* timer = o.device.is_cuda() && kernel ? cuda_timer(o.device, &no_timer) : nullptr) {
      const double bytes = result_bytes(generated);
      const double floor_us = speed_of_light_us(bytes, timer->copy_bandwidth());
      if (bytes >= (1 << 20) && g.median < 0.25 * floor_us) {
        r.flags.push_back("impossible-speed");
        std::ostringstream m;
        m << "the kernel's median " << g.median << " us is below a quarter of the " << floor_us
          << " us it takes to write its " << bytes / 1e6 << " MB of results at this device's measured copy bandwidth";
        return m.str();
      }
    }
  } catch (const TimedFlag& e) {
    r.flags.push_back(e.flag);
    return e.what();
  } catch (const RepetitionMismatch& e) {
    if (e.cached) r.flags.push_back("cached-result");
    return e.what();
  } catch (const NativeCallSeen&) {
    throw;
  } catch (const std::exception& e) {
    return std::string("failed while being timed: ") + e.what();
  }
  return "";
}

// A random op of replay/random_ops.h: judged by its properties (random_judge.h) with this runner's
// calls and native-call watch, then timed like any op (without comparing the timed runs' values).
CaseResult judge_random_case(const trace::TraceEntry& entry, const BoundCall& bound,
                             const backends::LoadedKernel* kernel, const RunOptions& o, CaseResult r) {
  const RandomSides sides{[&](const BoundCall& b, uint64_t seed) { return inputs_for(b, o, seed, "traced"); },
                          [&](const BoundCall& b, const Values& in, bool k) {
                            Values args = copies(in);
                            return call(b.op, k ? kernel : nullptr, args, o.device, "a call judged by its properties");
                          }};
  std::string why;
  try {
    const RandomVerdict v = judge_random(bound, sides, o.seed, r);
    if (std::string there = traced_elsewhere(entry, o.device); v.status == Status::Invalid && !there.empty())
      return with_status(r, Status::Skipped, "native on " + o.device.str() + " rejects this call, traced on " + there +
                                                 ": " + v.message);
    if (v.status != Status::Passed) return with_status(r, v.status, v.message);
    r.status = Status::Passed;
    RunOptions unchecked = o;
    unchecked.check = false;
    if (o.time) why = time_case(bound, "traced", kernel, {}, unchecked, r);
  } catch (const bb::Decline& d) {
    return with_status(r, Status::Skipped, std::string("declined: ") + d.what());
  } catch (const NativeCallSeen& e) {
    r.flags.push_back("native-call");
    why = e.what();
  } catch (const std::exception& e) {
    why = std::string("the kernel raised: ") + e.what();
  }
  return why.empty() ? r : with_status(r, Status::Failed, why);
}

}  // namespace

void report_phases_to(int fd, const std::string& prefix) {
  g_phase_fd = fd;
  g_phase_prefix = prefix;
}

namespace {
// How many repetitions time_both makes, as the report says it.
std::string repetitions(const RunOptions& o) {
  std::ostringstream s;
  s << o.repetitions << " interleaved repetitions per kernel";
  if (o.repetitions >= 5)
    s << " (up to " << 4 * o.repetitions << " while a side's interquartile range is wider than its median)";
  if (o.precision > 0)
    s << ", fewer once both medians are known to within " << 100 * o.precision
      << "% (95% confidence interval, 6 repetitions at least)";
  s << ", stopping after 5 once " << o.budget_seconds << " s are spent";
  return s.str();
}
}  // namespace

std::string timing_method(const RunOptions& o) {
  if (!o.time) return "not timed (--check-only)";
  if (o.device.is_cuda())
    return "device time from CUPTI: the busy time of every kernel, copy and set the call ran, on any stream, with "
           "the device otherwise idle and the L2 cache evicted (twice its size read, leaving no dirty line) before "
           "each run; CUDA events around the call as a cross-check; " + repetitions(o) +
           ", 2 warm-ups, new inputs (own seed) for every run pair; median and interquartile range";
  return "host clock (steady_clock), " + repetitions(o) +
         ", 2 warm-ups, new inputs (own seed) for every run pair, operands evicted from every cache level (clflush) "
         "before each run; median and interquartile range";
}

CaseResult run_case(const trace::TraceEntry& entry, const std::string& variant, const backends::LoadedKernel* kernel,
                    const RunOptions& o) {
  CaseResult r;
  r.op = entry.op;
  r.signature = signature_text(entry);
  r.variant = variant;
  r.calls = entry.count;
  std::optional<BoundCall> bound;
  Values inputs;
  try {
    bound = bind_call(entry);
    if (std::string why = unreplayable(*bound); !why.empty())
      return judged_by_properties(*bound) ? judge_random_case(entry, *bound, kernel, o, r)
                                          : with_status(r, Status::Skipped, why);
    inputs = inputs_for(*bound, o, o.seed, variant);
  } catch (const std::invalid_argument& e) {
    return with_status(r, Status::Skipped, e.what());
  }
  Values native, native_args = copies(inputs);
  try {
    native = call(bound->op, nullptr, native_args, o.device, "");
  } catch (const std::exception& e) {
    // A call traced on another device may hold what only that device's kernels accept; otherwise the
    // harness built a call that is not valid: its defect.
    if (std::string there = traced_elsewhere(entry, o.device); !there.empty())
      return with_status(r, Status::Skipped, "native on " + o.device.str() + " rejects this call, traced on " + there +
                                                 ": " + e.what());
    // A variant's other arguments (dims, sizes) were traced for the original shapes: where no meta
    // kernel could tell beforehand (ops without one), native's refusal says the variant does not apply.
    if (variant != "traced")
      return with_status(r, Status::Skipped, "variant " + variant + " does not apply to this call (native rejects it): " +
                                                 e.what());
    return with_status(r, Status::Invalid, std::string("native rejects this call: ") + e.what());
  }
  Values args = copies(inputs), generated;
  std::string native_call;
  try {
    PoisonScope poison(kPoisonA, o.device, poison_reserve(native));  // new memory holds a pattern, not old results
    generated = call(bound->op, kernel, args, o.device, "its first call", false, true, &native_call);
  } catch (const bb::Decline& d) {
    return with_status(r, Status::Skipped, std::string("declined: ") + d.what());
  } catch (const std::exception& e) {
    return with_status(r, Status::Failed, std::string("the kernel raised: ") + e.what());
  }
  if (!native_call.empty()) {
    r.flags.push_back("native-call");
    return with_status(r, Status::Failed, NativeCallSeen(native_call, "its first call").what());
  }
  std::string why;
  try {
    if (o.check) why = check(*bound, variant, kernel, inputs, native, native_args, args, generated, o, r);
    if (why.empty()) {
      r.status = Status::Passed;
      // Only the traced shapes are timed: they are what the program runs; the variants exist to be checked.
      if (o.time && variant == "traced") why = time_case(*bound, variant, kernel, generated, o, r);
    }
  } catch (const NativeCallSeen& e) {  // on any call of the kernel after its first
    r.flags.push_back("native-call");
    why = e.what();
  }
  return why.empty() ? r : with_status(r, Status::Failed, why);
}

}  // namespace bb::replay
