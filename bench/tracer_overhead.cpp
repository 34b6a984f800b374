// Per-op cost of the tracer's RecordFunction callback, from C++ (no Python in the loop):
// a tiny at::add in a tight loop with no callback, with an empty callback that asks for inputs
// (the floor any RecordFunction-based tracer pays), and with the bbshim tracer.
//   build/bin/bb_bench_tracer [iterations]
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tracer/observer.h"

namespace {

double ns_per_op(const at::Tensor& a, const at::Tensor& b, long n) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) at::add(a, b);
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
  }
  return best;
}

std::unique_ptr<at::ObserverContext> empty_start(const at::RecordFunction&) { return nullptr; }
void empty_end(const at::RecordFunction&, at::ObserverContext*) {}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 200000;
  at::Tensor a = at::ones({1}), b = at::ones({1});
  ns_per_op(a, b, n / 10);  // warm up
  const double none = ns_per_op(a, b, n);
  auto h = at::addGlobalCallback(
      at::RecordFunctionCallback(&empty_start, &empty_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  const double empty = ns_per_op(a, b, n);
  at::removeCallback(h);
  bb::tracer::start_tracing({});
  const double traced = ns_per_op(a, b, n);
  std::printf("at::add on 1-element CPU tensors, best of 5 x %ld calls\n", n);
  std::printf("  no callback                 %7.1f ns/op\n", none);
  std::printf("  empty callback, with inputs %7.1f ns/op  (+%.1f: RecordFunction + boxing)\n", empty, empty - none);
  std::printf("  bbshim tracer               %7.1f ns/op  (+%.1f; tracer's own share +%.1f)\n", traced, traced - none,
              traced - empty);
  return 0;
}
