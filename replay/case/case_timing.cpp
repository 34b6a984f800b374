// Step "time" of a replay case (replay/case/case_steps.h): native and the kernel under test, interleaved
// (alternating which goes first), with their operands evicted from the caches. Every run pair gets an
// input set of its own (its own seed; each side runs on its own copy of it), and the kernel's result is
// checked against native's on it (outside the timed region), so a kernel cannot be right once and then
// cached or wrong in the loop: no inputs repeat, so a cache keyed on addresses, shapes or values never
// hits.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <sstream>
#include <thread>

#include "bb/kernel.h"
#include "policy/verify/clock_checks.h"
#include "policy/verify/cuda_checks.h"
#include "policy/verify/integrity.h"
#include "policy/verify/native_watch.h"
#include "policy/verify/result_checks.h"
#include "replay/case/cache_evict.h"
#include "replay/case/case_steps.h"
#include "replay/timing/cupti_call_timer.h"
#include "replay/workers/remote_kernel.h"
#include "replay/case/spent.h"
#include "replay/workers/tamper.h"

namespace bb::replay {
namespace {

using Clock = std::chrono::steady_clock;
using verify::Flag;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// Whether the median of `samples` is known to within `precision` of it: the half-width of its
// distribution-free 95% confidence interval, [x(k), x(n+1-k)] of the sorted samples with the largest k
// whose coverage 1 - 2 P(Binomial(n, 1/2) < k) is at least 95% (six samples at least).
bool known_within(std::vector<double> samples, double precision) {
  const size_t n = samples.size();
  if (n < 6) return false;
  std::sort(samples.begin(), samples.end());
  size_t k = 0;                                                    // P(Binomial(n, 1/2) <= j), summed as j grows
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

// One side's runs: native (here) or the kernel under test (in its process).
struct Side {
  bool kernel = false;
  std::vector<double> us, events_us;          // per timed run
  std::vector<verify::OutsideRun> outside;    // the kernel's host-timed runs, seen from outside its process
  std::vector<verify::OutsideRun> dry;        // runs of nothing between them, seen the same way
  int activities = 0;                         // CUDA: kernels, copies and sets seen, all runs
  verify::Findings findings;                  // CUDA: the first of each kind
  bool allowed_aten = false;                  // it called ATen compute ops the policy allows (their libraries' kernels too)
  std::deque<Values> held;                    // native: the results of its latest runs, kept alive (hold())
  std::deque<RemoteRun> runs;                 // the kernel: its latest runs, kept alive in its process
  void clear() { us.clear(), events_us.clear(), outside.clear(), dry.clear(); }
};

// How many of a side's latest results stay alive, up to how many bytes: a result in the memory of one of
// them is a buffer the kernel reuses across calls (a ring of persistent buffers as deep as this is
// caught). The kernel's latest is held whatever its size (the checks of the next run need it); native's
// are held only for the allocator to treat both sides alike, and not past those bytes: a copy of every
// parameter of the 1B trace held for that ran its _foreach_ cases out of memory on an H100 (2026-12-07).
constexpr size_t kHeldResults = 8;
constexpr double kHeldBytes = 256.0 * (1 << 20);

template <class T, class Bytes, class Drop>
void keep_latest(std::deque<T>& held, T latest, Bytes bytes_of, Drop drop, size_t at_least = 1) {
  held.push_back(std::move(latest));
  double bytes = 0;
  for (const T& v : held) bytes += bytes_of(v);
  while (held.size() > kHeldResults || (held.size() > at_least && bytes > kHeldBytes)) {
    bytes -= bytes_of(held.front());
    drop(held.front());
    held.pop_front();
  }
}

// The interleaved runs of one case and what they found.
class Interleaved {
 public:
  // `first`: the kernel's first call (held like the timed runs' results).
  Interleaved(const CaseContext& c, CuptiCallTimer* timer, const CaseResult& r, const RemoteRun& first)
      : c_(c), o_(c.options), timer_(timer), r_(r) {
    generated_.kernel = true;
    generated_.runs.push_back(first);
    large_ = o_.device.is_cuda() && first.storage_bytes >= kLargeCase;  // (its arguments' and results' storages)
  }

  // Two warm-up pairs (first-call costs are not the kernel's), then the timed pairs.
  Finding run_all() {
    for (int w = -2; w < 0; ++w)
      if (Finding f = pair(w, true); f.found()) return f;
    // A call that launched no device work on either side, twice each (views, metadata, shape queries):
    // there is nothing to time, and timing it would only measure the timer.
    no_device_work_ = timer_ && native_.activities == 0 && generated_.activities == 0;
    native_.clear();
    generated_.clear();
    if (!no_device_work_)
      if (Finding f = repetitions(); f.found()) return f;
    if (Finding f = confirm_clocks(); f.found()) return f;
    return judge_findings();
  }

  // "" or why there are no times although both sides ran.
  std::string not_timed() const {
    return no_device_work_ ? "no device work: neither native nor the kernel launched a kernel, copy or set in two "
                             "runs each"
                           : "";
  }
  Timing native() const { return summarize(native_.us, native_.events_us); }
  Timing generated() const { return summarize(generated_.us, generated_.events_us); }

 private:
  // Enough once both medians are known to within `precision` (the fast, steady kernels of a GPU: 6
  // pairs, not 25). Samples that are no evidence of speed yet (unstable(): a busy machine, a clock
  // change) get more repetitions, up to four times those asked for (when five or more were), within
  // the budget: noise is outwaited, not reported.
  Finding repetitions() {
    const auto start = Clock::now();
    making_inputs_ = 0;  // seconds spent making inputs: not part of the budget
    const int most = 4 * o_.repetitions;
    for (int rep = 0; rep < most; ++rep) {
      if (o_.precision > 0 && known_within(native_.us, o_.precision) && known_within(generated_.us, o_.precision))
        break;
      if (rep >= o_.repetitions &&
          (o_.repetitions < 5 || unstable(summarize(native_.us), summarize(generated_.us)).empty()))
        break;
      if (Finding f = pair(rep, rep % 2 == 0); f.found()) return f;
      if (rep >= 4 && seconds_since(start) - making_inputs_ > o_.budget_seconds) break;
    }
    return {};
  }

  // The outside clocks' disagreement is confirmed before it is called one, twice: each time as many
  // timed pairs again (twelve at least: the lower quartile of five was two runs, and two noisy runs of
  // nothing cleared a kernel taking twice the allowance under a parallel ctest; so did noisy runs of
  // nothing among twelve, until each side was judged on its own lower quartile: clock_checks.h), a
  // little later, judged alone. A busy virtual machine interrupts runs in a row now and then (native
  // against native on the 2-core VM with --repetitions 3: 11 cases of 14 traces flagged, most of their runs 100-300 us longer
  // seen from outside, none again when rerun, 2026-12-04); a kernel that takes time off its clock takes
  // it on every run. Where a later set is clean, the times reported are that set's alone: the runs the
  // outside clocks vouch for.
  Finding confirm_clocks() {
    if (verify::clock_disagreement(generated_.outside, generated_.dry).empty()) return {};
    const int more = std::max(12, o_.repetitions);
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const size_t from = generated_.outside.size(), from_us = generated_.us.size();
      for (int k = 0; k < more; ++k) {
        const int rep = static_cast<int>(generated_.us.size());
        if (Finding f = pair(rep, rep % 2 == 0); f.found()) return f;
      }
      const std::vector<verify::OutsideRun> runs(generated_.outside.begin() + from, generated_.outside.end()),
          dry(generated_.dry.begin() + from, generated_.dry.end());
      ++confirmations_;
      if (verify::clock_disagreement(runs, dry).empty()) {
        confirmed_clean_ = true;
        if (native_.us.size() == generated_.us.size())  // (pairs: native's times beside the kernel's)
          for (std::vector<double>* v : {&native_.us, &generated_.us}) v->erase(v->begin(), v->begin() + from_us);
        return {};
      }
    }
    return {};
  }

  // Native's run of a pair, here: its own copy of the inputs, its results.
  struct Ran {
    Values args;
    Called called;
  };

  // One pair of runs on an input set of its own; the kernel's results checked against native's and for
  // input mutation, aliasing, reused buffers and escaped work (all outside the timed region).
  Finding pair(int rep, bool native_first) {
    // A large case's previous pair (its inputs, native's copies and results, the kernel's results read
    // back) sits in this process's cache, which the kernel's process, on the same device, cannot have:
    // given back before the kernel's next argument set is made there. (Without it the 1B trace's
    // _foreach_sqrt, 4.6 GiB a value set, ran an H100 out of memory in the kernel's process, 44.56 MiB
    // free, 2026-12-07 and 2026-12-08.) Some milliseconds a pair, for cases of a GiB or more.
    if (large_) {
      Spent spent(phase::kMemory);
      release_device_cache(o_.device);
    }
    // (seeds 7919·k apart from the checks' own; warm-ups are rep -2 and -1)
    const auto made = Clock::now();
    const Values inputs = inputs_for(c_.bound, c_.variant, o_, o_.seed + 7919 * static_cast<uint64_t>(rep + 3));
    making_inputs_ += seconds_since(made);
    const std::string phase = rep < 0 ? "a warm-up run" : "timed repetition " + std::to_string(rep + 1);
    Ran expected;
    RemoteRun got;
    if (native_first) {
      expected = run_native(inputs);
      got = run_kernel(inputs, rep >= 0);
    } else {
      got = run_kernel(inputs, rep >= 0);
      expected = run_native(inputs);
    }
    if (!got.called.native_call.empty()) return native_call_seen(got.called.native_call, phase);
    if (Finding f = mutated(inputs, expected.args, got.args, phase); f.found()) return f;
    const Values& results = got.called.results;
    if (Finding f = aliasing_after(c_, expected.args, expected.called.results, got.args, results, phase); f.found())
      return f;
    if (reused(got))
      return caught(Flag::Aliasing, phase +
                                        ": the kernel returned the memory of one of its earlier results, which the "
                                        "caller still holds (a buffer reused across calls)");
    if (Finding f = previous_changed(phase); f.found()) return f;
    keep_latest(
        native_.held, expected.called.results, [](const Values& v) { return result_bytes(v); },
        [](const Values&) {}, 0);
    // (a run held is its whole argument set in the kernel's process, counted by its storages there:
    // in-place ops' lists of parameters are all arguments. Its arguments' replica here is let go: what
    // is asked of a held run later is where its storages are and its results' bytes. Held, it was a
    // copy of every parameter of the 1B trace's _foreach_ cases, which ran out of memory on an H100.)
    RemoteRun held = got;
    held.args.clear();
    keep_latest(
        generated_.runs, held, [](const RemoteRun& v) { return static_cast<double>(v.storage_bytes); },
        [this](const RemoteRun& v) { c_.kernel.release(v.id); });
    last_ = std::move(held);
    if (!o_.check) return escaped(c_, got, phase, false);
    CaseResult scratch = r_;  // (the timed runs' errors and notes are not the case's)
    const Finding wrong = compare(c_, inputs, expected.called.results, results, scratch);
    if (Finding e = escaped(c_, got, phase, wrong.found()); e.found()) return e;
    if (!wrong.found()) {
      previous_ = results;
      return {};
    }
    const bool cached = !previous_.empty() && same_bytes(previous_, results);
    const std::string why = (rep < 0 ? std::string("warm-up run: ") : phase + ": ") +
                            (cached ? "the kernel returned exactly its result for other inputs: " : "") + wrong.why;
    return cached ? caught(Flag::CachedResult, why) : failure(why);
  }

  // An input the kernel changed in this run although the schema does not let it (and native did not):
  // checked on every run, not only the checked calls, so that a kernel honest there cannot use its
  // inputs as scratch memory when timed. Arguments native changes too (batch_norm's running stats) are
  // its right.
  Finding mutated(const Values& inputs, const Values& native_args, const Values& args, const std::string& phase) {
    {
      Spent spent(phase::kIntegrity);
      const std::vector<bool> now = verify::unwritable_changes(c_.op().schema(), inputs, native_args);
      native_wrote_.resize(now.size());
      for (size_t i = 0; i < now.size(); ++i) native_wrote_[i] = native_wrote_[i] || now[i];
    }
    return input_mutation(c_, inputs, args, native_wrote_, phase);
  }

  // Whether a result of the kernel's is in the memory of one of its earlier results that are held.
  bool reused(const RemoteRun& got) const {
    const size_t outputs = c_.op().schema().returns().size();
    for (const RemoteRun& earlier : generated_.runs)
      if (reuses(earlier, got, outputs)) return true;
    return false;
  }

  // The kernel's previous result, which it still holds, read again from its process: changed during this
  // run, it shares memory with a later result, whatever the addresses say (one memory mapped at a new
  // address for every result).
  Finding previous_changed(const std::string& phase) {
    if (!last_) return {};
    if (c_.kernel.results_unchanged(*last_)) return {};
    return caught(Flag::Aliasing, phase +
                                      ": the kernel's previous result, which the caller still holds, changed "
                                      "during this run (its memory is shared with a later result, under "
                                      "another address if need be)");
  }

  // Native's timed run, here, on its own copy of the inputs. Both sides run the same way (the kernel's in
  // kernel_worker.cpp): on the host, operands evicted, then the clock around the call and the touch of its
  // results (two random bytes a page); on CUDA, CUPTI's window.
  Ran run_native(const Values& inputs) {
    Ran ran;
    ran.args = copies(inputs);
    note_phase(false);
    if (timer_) {
      ran.called = native_on_device(ran.args);
      return ran;
    }
    {
      Spent evicting(phase::kEvict);
      evict(ran.args);
      synchronize(o_.device);
    }
    Spent timed(phase::kTimed);
    const uint64_t seed = seed_++;
    c_.kernel.pause();  // (no thread of the kernel's competes for the cores meanwhile)
    const uint64_t t0 = raw_monotonic_ns();
    ran.called = call(c_.op(), nullptr, ran.args, o_, true, true);
    touch(ran.called.results, seed);
    native_.us.push_back(static_cast<double>(raw_monotonic_ns() - t0) / 1000.0);
    c_.kernel.resume();
    return ran;
  }

  Called native_on_device(const Values& args) {
    Called result;
    // the timer's eviction and synchronization (records: kCupti)
    std::optional<Spent> evicting(std::in_place, phase::kEvict, false, __FILE__, __LINE__);
    CuptiCallSample s = timer_->time([&] {
      Spent timed(phase::kTimed);
      result = call(c_.op(), nullptr, args, o_, true, false);
    });
    Spent::charge_within(phase::kCupti, (s.steps.flush + s.steps.collect) / 1e6);
    evicting.reset();
    native_.us.push_back(s.device_us);
    native_.events_us.push_back(s.events_us);
    native_.activities += s.activities;
    note(native_, s.findings);
    return result;
  }

  // The kernel's timed run, in its process, on an argument set of its own made from the inputs.
  RemoteRun run_kernel(const Values& inputs, bool timed) {
    const int64_t id = c_.kernel.prepare(inputs);
    // (the previous run's results described in the same answer, as they are after this run: previous_changed)
    RemoteRun run = c_.kernel.run_timed(id, last_ ? &*last_ : nullptr);
    generated_.us.push_back(run.us);
    generated_.allowed_aten |= !run.called.allowed_aten.empty();
    if (!o_.device.is_cpu()) {
      generated_.events_us.push_back(run.events_us);
      generated_.activities += run.activities;
      note(generated_, run.cuda);
    }
    if (timed && run.outside) {
      generated_.outside.push_back(*run.outside);
      // (and a run of nothing right after, in the same conditions: what the outside clocks see beyond a call)
      generated_.dry.push_back(c_.kernel.dry_run(run.id));
    }
    return run;
  }

  static void note(Side& side, const verify::Findings& f) {
    if (side.findings.escaping.empty()) side.findings.escaping = f.escaping;
    if (side.findings.tampering.empty()) side.findings.tampering = f.tampering;
    if (side.findings.library.empty()) side.findings.library = f.library;
    if (side.findings.blinded.empty()) side.findings.blinded = f.blinded;
  }

  // A kernel is accused only of what native itself does not do here; native against native (the
  // self-check) is accused of anything, so that a check that fires on honest work shows there.
  Finding judge_findings() const {
    const verify::Findings& n = native_.findings;
    const verify::Findings& g = generated_.findings;
    const bool self = c_.self_check;
    if (!g.escaping.empty() && (self || n.escaping.empty())) return caught(Flag::EscapingWork, g.escaping);
    if (!g.tampering.empty() && (self || n.tampering.empty())) return caught(Flag::EnvironmentTampering, g.tampering);
    if (!g.blinded.empty()) return caught(Flag::TimerTampering, g.blinded);
    if (!self && !g.library.empty() && !generated_.allowed_aten)
      return caught(Flag::NativeCall, g.library + ": a vendor library did the work of the op the kernel implements");
    if (std::string why = verify::clock_disagreement(generated_.outside, generated_.dry);
        !why.empty() && !confirmed_clean_)
      return caught(Flag::TimerTampering,
                    why + (confirmations_ ? "; and again on each of " + std::to_string(confirmations_) +
                                                " later sets of runs, judged alone"
                                          : ""));
    return {};
  }

  const CaseContext& c_;
  const RunOptions& o_;
  CuptiCallTimer* timer_;  // null: host clock
  const CaseResult& r_;
  Side native_, generated_;
  Values previous_;                 // the kernel's (correct) result on the previous pair's inputs
  std::optional<RemoteRun> last_;   // the kernel's run of the previous pair (its results still held there)
  std::vector<bool> native_wrote_;  // per argument: native changed it in some run, although the schema does not say so
  double making_inputs_ = 0;
  bool large_ = false;  // a CUDA case whose values are kLargeCase or more: caches given back between pairs
  bool no_device_work_ = false;
  bool confirmed_clean_ = false;  // the outside clocks agreed on a later set of runs (confirm_clocks)
  int confirmations_ = 0;         // later sets of runs the outside clocks were judged on
  uint64_t seed_ = 0x9E3779B97F4A7C15ull;
};

// `bytes` of results four times faster than writing them at the copy bandwidth this device reached: not to be
// trusted. (Not closer: results smaller than L2 can be written into it faster than to memory.)
Finding impossible_speed(const CaseContext& c, double bytes, const Timing& g) {
  std::string no_timer;
  CuptiCallTimer* timer = c.options.device.is_cuda() && !c.self_check ? call_timer(c.options.device, &no_timer) : nullptr;
  if (!timer) return {};
  const double floor_us = verify::speed_of_light_us(bytes, timer->copy_bandwidth());
  if (bytes < (1 << 20) || g.median >= 0.25 * floor_us) return {};
  std::ostringstream m;
  m << "the kernel's median " << g.median << " us is below a quarter of the " << floor_us
    << " us it takes to write its " << bytes / 1e6 << " MB of results at this device's measured copy bandwidth";
  return caught(Flag::ImpossibleSpeed, m.str());
}

// How many repetitions the step makes, as the report says it.
std::string repetitions_text(const RunOptions& o) {
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

Finding time_case(const CaseContext& c, RemoteRun first, CaseResult& r) {
  Spent unnamed(phase::kUnnamed);
  const double results_bytes = result_bytes(first.called.results);
  first.args.clear(), first.called.results.clear();  // (what is asked of a held run: its ranges, its bytes)
  const RunOptions& o = c.options;
  std::string why_not;
  CuptiCallTimer* timer = o.device.is_cuda() ? call_timer(o.device, &why_not) : nullptr;
  if (o.device.is_cuda() && !timer) {  // no device timing in this worker: the case stays checked, not timed
    r.message = "not timed: no device timing: " + why_not;
    return {};
  }
  try {
    Interleaved runs(c, timer, r, first);
    if (Finding f = runs.run_all(); f.found()) return f;
    if (std::string why = runs.not_timed(); !why.empty()) {
      r.message = "not timed: " + why;
      return {};
    }
    r.native = runs.native();
    r.generated = runs.generated();
    r.unstable = unstable(*r.native, *r.generated);
    return impossible_speed(c, results_bytes, *r.generated);
  } catch (const std::exception& e) {
    // Out of device memory while timing (the judge's copies of a large case beside the kernel's): the
    // case stays what its checks found, and says why it has no times; the worker gives the memory back
    // and times it once more (bbreplay_worker.cpp). Before, the whole case was left unjudged.
    if (const std::string what = e.what(); what.find("out of memory") != std::string::npos) {
      r.message = std::string(kNotTimedOutOfMemory) + what;
      return {};
    }
    return failure(std::string("failed while being timed: ") + e.what());
  }
}

std::string timing_method(const RunOptions& o) {
  if (!o.time) return "not timed (--check-only)";
  if (o.device.is_cuda())
    return "device time from CUPTI: the busy time of every kernel, copy and set the call ran, on any stream, with "
           "the device otherwise idle and the L2 cache evicted (twice its size read, leaving no dirty line) before "
           "each run; CUDA events around the call as a cross-check; " +
           repetitions_text(o) +
           ", 2 warm-ups, new inputs (own seed) for every run pair; median and interquartile range";
  return "host clock (steady_clock), " + repetitions_text(o) +
         ", 2 warm-ups, new inputs (own seed) for every run pair, operands evicted from every cache level (clflush) "
         "before each run; median and interquartile range";
}

}  // namespace bb::replay
