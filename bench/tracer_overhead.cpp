// Per-call cost of the tracer's RecordFunction callback, from C++ (no Python in the loop), on calls of
// the kinds a training step is made of: a binary op (tensors and a scalar), a view (an int list, which
// boxing turns into a heap-allocated list), a reduction over dims and a foreach op over 16 tensors.
// Each runs in a tight loop with no callback, with an empty callback that asks for inputs (the floor
// any RecordFunction-based tracer pays: RecordFunction itself and boxing the arguments), and with the
// bbshim tracer (the difference is the tracer's own work: the signature key, its lookup, the counters).
//   build/bin/bb_bench_tracer [iterations] [none|empty|traced]
// With a phase named, only that phase runs (for `perf stat -e instructions`, which is steadier than time
// on a noisy machine).
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tracer/observer.h"

namespace {

// The phases, in the order they run; a case's times are indexed by phase.
enum Phase { kNone, kEmpty, kTraced, kPhases };
constexpr const char* kPhaseNames[kPhases] = {"none", "empty", "traced"};

struct Case {
  const char* what;
  std::function<void()> call;
  double ns[kPhases] = {0, 0, 0};
};

double ns_per_call(const std::function<void()>& call, long n) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) call();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
  }
  return best;
}

std::unique_ptr<at::ObserverContext> empty_start(const at::RecordFunction&) { return nullptr; }
void empty_end(const at::RecordFunction&, at::ObserverContext*) {}

void measure(std::vector<Case>& cases, Phase phase, long n) {
  for (Case& c : cases) {
    ns_per_call(c.call, n / 20);  // warm up (and, traced, see the signature once)
    c.ns[phase] = ns_per_call(c.call, n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 200000;
  int only = kPhases;  // every phase
  if (argc > 2) {
    only = static_cast<int>(std::find(kPhaseNames, kPhaseNames + kPhases, std::string(argv[2])) - kPhaseNames);
    if (only == kPhases) {
      std::fprintf(stderr, "bb_bench_tracer: unknown phase '%s' (none, empty or traced)\n", argv[2]);
      return 2;
    }
  }
  auto runs = [only](Phase p) { return only == kPhases || only == p; };
  at::Tensor a = at::ones({1}), b = at::ones({1}), m = at::ones({4, 8, 16});
  std::vector<at::Tensor> params;
  for (int i = 0; i < 16; ++i) params.push_back(at::ones({4}));
  std::vector<Case> cases;
  cases.push_back({"add(1-element, 1-element)", [&] { at::add(a, b); }});
  cases.push_back({"view(4x8x16, [32, 16])", [&] { m.view({32, 16}); }});
  cases.push_back({"sum(4x8x16, dim=[0, 2])", [&] { at::sum(m, at::IntArrayRef{0, 2}); }});
  cases.push_back({"_foreach_mul_(16 tensors, 1.0)", [&] { at::_foreach_mul_(params, 1.0); }});

  if (runs(kNone)) measure(cases, kNone, n);
  if (runs(kEmpty)) {
    auto h = at::addGlobalCallback(
        at::RecordFunctionCallback(&empty_start, &empty_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
    measure(cases, kEmpty, n);
    at::removeCallback(h);
  }
  if (runs(kTraced)) {
    bb::tracer::start_tracing({});
    measure(cases, kTraced, n);
  }

  std::printf("ns per call, CPU tensors, best of 5 x %ld calls (a call may dispatch nested ops: each pays)\n", n);
  if (only != kPhases) {  // one phase: its times only, no differences against phases that did not run
    std::printf("%-32s %9s\n", "call", kPhaseNames[only]);
    for (const Case& c : cases) std::printf("%-32s %9.1f\n", c.what, c.ns[only]);
    return 0;
  }
  std::printf("%-32s %9s %9s %9s %14s %14s\n", "call", "none", "empty cb", "bbshim", "RF + boxing", "tracer's own");
  for (const Case& c : cases)
    std::printf("%-32s %9.1f %9.1f %9.1f %+14.1f %+14.1f\n", c.what, c.ns[kNone], c.ns[kEmpty], c.ns[kTraced],
                c.ns[kEmpty] - c.ns[kNone], c.ns[kTraced] - c.ns[kEmpty]);
  return 0;
}
