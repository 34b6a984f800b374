// What device timing's hooks cost one op call on the host (CuptiSession::op_start and op_end, as the
// tracer calls them), with a CuptiApi that does nothing (no GPU needed), on 64 signatures in turn:
//   all          every call timed (BB_DEVICE_TIME=all): every call followed
//   open         first-calls timing, window open, every signature timed enough: followed
//   closed-old   first-calls timing, CUPTI detached, where launches of unfollowed calls cannot be told
//                apart (external-all, or before bdeece1): every call still followed
//   closed       the same where they can (callback mode, the default): calls no signature wants are
//                not followed (op_start returns false; no end hook)
//   build/bin/bb_bench_devtime_hooks [calls]
// Prints ns per call, best of 5 runs of `calls` calls (default 10 M). The code runs from a library the
// program dlopens (bb_bench_devtime_hooks_lib), as in the preload: there every thread_local access is
// a call to __tls_get_addr, which an executable's own code never pays.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tracer/devtime/cupti_session.h"

namespace {

using namespace bb::devtime;

class NullCupti final : public CuptiApi {
 public:
  explicit NullCupti(bool untracked) : untracked_(untracked) {}
  std::string enable(Collector*) override { return ""; }
  void disable() override {}
  void push(uint64_t e) override { last_ = e; }
  void pop() override {}
  void flush(bool) override {}
  uint64_t now() override { return 0; }
  bool uses_callbacks() const override { return true; }
  bool links_untracked() const override { return untracked_; }
  std::string record(bool) override { return ""; }
  bool can_detach() const override { return true; }
  bool detach(uint32_t) override { return detached_ = true; }
  bool detached() const override { return detached_; }
  std::string attach() override {
    detached_ = false;
    return "";
  }
  uint64_t last_ = 0;

 private:
  const bool untracked_;
  bool detached_ = false;
};

constexpr uint32_t kSignatures = 64;

double ns_per_call(CuptiSession& s, long n) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i)
      if (s.op_start(static_cast<uint32_t>(i) % kSignatures)) s.op_end();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n));
  }
  return best;
}

// A session in the given state, every signature already timed as often as it wants.
std::unique_ptr<CuptiSession> session(bool first_calls, bool untracked, bool close) {
  Sampling sampling = first_calls ? Sampling::first_calls(1, 0, 0) : Sampling{};
  auto s = std::make_unique<CuptiSession>(
      std::make_unique<NullCupti>(untracked), CollectorOptions{},
      [](const std::string& w) { std::fprintf(stderr, "%s\n", w.c_str()); }, sampling);
  if (!s->start("")) std::exit(1);
  for (uint32_t sig = 0; sig < kSignatures; ++sig)
    for (int k = 0; k < 2; ++k)  // seen twice: repeats; credited: wants no more
      if (s->op_start(sig)) s->op_end();
  if (close && !s->window(false, std::chrono::steady_clock::now(), "bench")) std::exit(1);
  return s;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int bb_bench_devtime_hooks(long n) {
  struct Row {
    const char* name;
    bool first_calls, untracked, close;
  };
  const Row rows[] = {{"all", false, true, false},
                      {"open", true, true, false},
                      {"closed-old", true, false, true},
                      {"closed", true, true, true}};
  std::printf("%-12s %10s\n", "state", "ns/call");
  for (const Row& r : rows) {
    auto s = session(r.first_calls, r.untracked, r.close);
    std::printf("%-12s %10.2f\n", r.name, ns_per_call(*s, n));
    s->finish();
  }
  return 0;
}
