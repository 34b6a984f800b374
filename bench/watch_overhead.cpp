// What the native-call watch (policy/verify/native_watch.h) adds to a kernel's call, from C++: bbreplay
// watches every call of a kernel under test, timed runs included, so this is the most it can add to
// a CPU kernel's measured time. Kernels that call 1 and 8 plumbing ops (allocation, views), on a tiny
// and on a 64x1024 float32 input, timed with and without a watch, interleaved, best of 7 rounds; with a
// watch kept around the loop (bbreplay's timed runs) and with one made per call (routing).
//   build/bin/bb_bench_watch [iterations]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include "policy/verify/native_watch.h"

namespace {

// relu written by hand: one allocation (at::empty), `extra` further plumbing calls (views).
at::Tensor relu_kernel(const at::Tensor& x, int extra) {
  at::Tensor out = at::empty(x.sizes(), x.options());
  for (int i = 0; i < extra; ++i) (void)out.view({-1});
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0 ? in[i] : 0.0f;
  return out;
}

double ns_per_call(const std::function<void()>& f, long n) {
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

const std::string kOp = "aten::relu";

// `outer`: a watch is alive around the timing loop, as bbreplay keeps one around each timed run, so
// that each call pays only for a nested watch and the callback; otherwise each call adds and removes
// the thread-local callback itself (the preload's routing).
void row(const char* what, const at::Tensor& x, int extra, long n, bool outer) {
  auto bare = [&] { relu_kernel(x, extra); };
  auto watched = [&] {
    bb::verify::NativeCallWatch watch(kOp);
    relu_kernel(x, extra);
    if (!watch.first().empty()) std::abort();
  };
  double best_bare = 1e30, best_watched = 1e30;
  for (int round = 0; round < 7; ++round) {  // interleaved: drift hits both alike
    best_bare = std::min(best_bare, ns_per_call(bare, n));
    std::optional<bb::verify::NativeCallWatch> around;
    if (outer) around.emplace(kOp);
    best_watched = std::min(best_watched, ns_per_call(watched, n));
  }
  std::printf("%-44s %12.1f %12.1f %+10.1f ns %+8.2f%%\n", what, best_bare, best_watched, best_watched - best_bare,
              100.0 * (best_watched - best_bare) / best_bare);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 20000;
  at::Tensor tiny = at::randn({16}), large = at::randn({64, 1024});
  std::printf("%-44s %12s %12s %13s %9s\n", "kernel", "bare ns", "watched ns", "difference", "");
  for (bool outer : {true, false}) {
    const std::string how = outer ? " (bbreplay)" : " (routing)";
    row(("relu [16], 1 ATen op" + how).c_str(), tiny, 0, n, outer);
    row(("relu [16], 8 ATen ops" + how).c_str(), tiny, 7, n, outer);
    row(("relu [64,1024], 1 ATen op" + how).c_str(), large, 0, std::max(1L, n / 50), outer);
  }
  return 0;
}
