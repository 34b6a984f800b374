// Device timing without a GPU: a fake CUPTI that behaves as the real one does for what the timer
// relies on (a per-thread external-id stack, a correlation id per launch, ExternalCorrelation and
// API records at launch time, device records later, buffers handed over on flush).
#include <nlohmann/json.hpp>

#include <random>
#include <sstream>
#include <thread>

#include "catch.h"
#include "tracer/devtime/collector.h"
#include "tracer/devtime/cupti_session.h"
#include "tracer/devtime/signature_wants.h"
#include "tracer/devtime/timeline.h"

using namespace bb::devtime;

namespace {

constexpr uint64_t kT0 = 1'700'000'000'000'000'000ull;  // a realtime-like clock, ns

struct FakeCupti : CuptiApi {
  struct Log {
    int enables = 0, disables = 0, pushes = 0, pops = 0, flushes = 0, forced = 0, records_on = 0, records_off = 0;
    int detaches = 0, attaches = 0;
    std::vector<uint64_t> pushed;
  };
  std::shared_ptr<Log> log = std::make_shared<Log>();
  std::string enable_error, record_error;
  Collector* sink = nullptr;
  bool enabled = false;
  bool recording = true;     // sampled timing's windows
  bool detachable = false;   // sampled timing may detach CUPTI between windows
  bool launch_comes = true;  // a launch comes to detach at (false: the program is idle)
  bool is_detached = false;
  uint32_t last_link = 0;
  uint64_t clock = kT0;
  uint32_t next_corr = 1;
  std::vector<uint64_t> stack;  // one thread is enough for these tests
  // The "buffers": what the next flush hands over.
  std::vector<std::pair<uint32_t, uint64_t>> externals;
  std::vector<ApiCall> api;
  std::vector<DeviceActivity> activities;
  std::vector<DeviceActivity> running;               // launched, not finished: only a forced flush returns them
  std::vector<std::pair<int, DeviceActivity>> late;  // finishing after so many more flushes

  std::string enable(Collector* s) override {
    ++log->enables;
    if (!enable_error.empty()) return enable_error;
    sink = s;
    enabled = true;
    return "";
  }
  void disable() override {
    if (is_detached) return;
    ++log->disables;
    enabled = false;
  }
  void push(uint64_t e) override {
    ++log->pushes;
    log->pushed.push_back(e);
    stack.push_back(e);
  }
  void pop() override {
    ++log->pops;
    REQUIRE(!stack.empty());
    stack.pop_back();
  }
  void flush(bool forced) override {
    if (is_detached) return;
    ++log->flushes;
    for (auto it = late.begin(); it != late.end();) {  // the device catches up
      if (--it->first <= 0) {
        activities.push_back(it->second);
        it = late.erase(it);
      } else {
        ++it;
      }
    }
    if (forced) ++log->forced;
    if (!sink) return;
    for (auto& [c, e] : externals) sink->add_external(c, e);
    for (auto& a : api) sink->add_api(a);
    for (auto& a : activities) sink->add_activity(a, clock);
    if (forced)
      for (auto& a : running) sink->add_activity(a, clock);
    externals.clear();
    api.clear();
    activities.clear();
    if (forced) running.clear();
    sink->end_round(false);
  }
  uint64_t now() override { return clock; }
  std::string record(bool on) override {
    if (is_detached) return on ? "detached" : "";
    ++(on ? log->records_on : log->records_off);
    if (!record_error.empty()) return record_error;
    recording = on;
    return "";
  }
  bool can_detach() const override { return detachable; }
  bool detach(uint32_t) override {
    if (!detachable || !launch_comes) return false;
    ++log->detaches;
    is_detached = true;
    return true;
  }
  bool detached() const override { return is_detached; }
  std::string attach() override {
    ++log->attaches;
    is_detached = false;
    recording = true;
    return "";
  }
  uint32_t last_linked() const override { return last_link; }

  // The program launches a kernel of `ns` on `stream`; it finishes unless `finished` is false, after
  // `flushes_late` more flushes if that is set (the device runs behind the host).
  uint32_t launch(const std::string& name, uint64_t ns, uint32_t stream = 7, bool finished = true,
                  int flushes_late = 0) {
    if (!enabled) return 0;
    const uint32_t corr = next_corr++;
    if (!recording || is_detached) {  // no link, no record: as if it never ran
      clock += ns + 10000;
      return corr;
    }
    if (!stack.empty()) {
      externals.push_back({corr, stack.back()});
      last_link = corr;
    }
    api.push_back({corr, clock, clock + 2000, 42, "cudaLaunchKernel"});
    DeviceActivity a;
    a.correlation = corr;
    a.start = clock + 5000;
    a.end = finished ? a.start + ns : 0;
    a.stream = stream;
    a.name = name;
    a.grid[0] = 4;
    a.block[0] = 128;
    if (flushes_late > 0) late.emplace_back(flushes_late, a);
    else
      (finished ? activities : running).push_back(a);
    clock += ns + 10000;
    return corr;
  }
};

struct Rig {
  FakeCupti* cupti;
  std::shared_ptr<FakeCupti::Log> log;
  std::vector<std::string> warnings;
  std::unique_ptr<CuptiSession> timer;
  explicit Rig(CollectorOptions o = {}, Sampling sampling = {}) {
    auto c = std::make_unique<FakeCupti>();
    cupti = c.get();
    log = c->log;
    timer = std::make_unique<CuptiSession>(
        std::move(c), o, [this](const std::string& w) { warnings.push_back(w); }, sampling);
  }
};

DeviceActivity kernel(uint32_t corr, uint64_t start, uint64_t ns, const std::string& name = "k") {
  DeviceActivity a;
  a.correlation = corr;
  a.start = start;
  a.end = start + ns;
  a.name = name;
  return a;
}

}  // namespace

TEST_CASE("external ids carry the signature and a serial") {
  const uint64_t e = make_external_id(1234, 99);
  CHECK(signature_of(e) == 1234);
  CHECK((e & ((uint64_t{1} << 40) - 1)) == 99);
  CHECK(signature_of(make_external_id(kNoSignature, 1)) == kNoSignature);
}

TEST_CASE("the sketch: exact statistics for few calls, a median within 0.8% for many") {
  Sketch s;
  for (uint64_t v : {500, 100, 300, 200}) s.add(v);
  CHECK(s.count() == 4);
  CHECK(s.total() == 1100);
  CHECK(s.min() == 100);
  CHECK(s.max() == 500);
  CHECK(s.median() == 250);

  Sketch big;
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(10.0, 1.5);
  std::vector<uint64_t> values;
  for (int k = 0; k < 20001; ++k) {
    values.push_back(static_cast<uint64_t>(dist(rng)) + 1);
    big.add(values.back());
  }
  std::sort(values.begin(), values.end());
  const double truth = static_cast<double>(values[values.size() / 2]);
  CHECK(std::abs(static_cast<double>(big.median()) - truth) / truth < 0.008);
  CHECK(big.min() == values.front());
  CHECK(big.max() == values.back());
}

TEST_CASE("kernels are attributed through their launch's external id and summed per call") {
  Collector c;
  c.begin(kT0);
  const uint64_t call1 = make_external_id(3, 1), call2 = make_external_id(3, 2), other = make_external_id(5, 3);
  c.add_external(10, call1);
  c.add_external(11, call1);
  c.add_external(12, call2);
  c.add_external(13, other);
  c.add_activity(kernel(10, kT0 + 100, 1000, "_Z6kernelv"), kT0 + 1'000'000);
  c.add_activity(kernel(11, kT0 + 2000, 500, "_Z6kernelv"), kT0 + 1'000'000);
  c.add_activity(kernel(12, kT0 + 3000, 2000, "memcpy-ish"), kT0 + 1'000'000);
  c.add_activity(kernel(13, kT0 + 9000, 40), kT0 + 1'000'000);
  c.end_round(false);
  CHECK(c.by_signature()[3].per_call.count() == 0);  // not final yet: more records may come
  c.end_round(false);
  c.end_round(false);
  auto sigs = c.by_signature();
  REQUIRE(sigs.count(3));
  CHECK(sigs[3].per_call.count() == 2);
  CHECK(sigs[3].per_call.total() == 3500);
  CHECK(sigs[3].per_call.min() == 1500);
  CHECK(sigs[3].per_call.max() == 2000);
  CHECK(sigs[3].kernels["kernel()"] == 2);  // demangled
  CHECK(sigs[3].kernels["memcpy-ish"] == 1);
  CHECK(sigs[5].per_call.total() == 40);
  CHECK(c.health().calls_timed == 3);
  CHECK(c.health().unattributed == 0);
}

TEST_CASE("a call's records may straddle buffers; a device record may come before its link") {
  Collector c;
  c.begin(kT0);
  const uint64_t call = make_external_id(1, 1);
  c.add_activity(kernel(20, kT0 + 10, 100), kT0 + 1'000'000);  // link not yet seen
  c.end_round(false);
  c.add_external(20, call);
  c.add_external(21, call);
  c.end_round(false);
  c.add_activity(kernel(21, kT0 + 500, 300), kT0 + 1'000'000);
  c.end_round(false);
  c.end_round(false);
  CHECK(c.by_signature()[1].per_call.count() == 0);
  c.end_round(false);
  auto s = c.by_signature()[1].per_call;
  CHECK(s.count() == 1);
  CHECK(s.total() == 400);
}

TEST_CASE("device work launched outside any op is counted as unattributed, by name") {
  Collector c;
  c.begin(kT0);
  c.add_activity(kernel(30, kT0 + 10, 700, "triton_poi_fused_add_0"), kT0 + 1'000'000);
  c.end_round(false);
  c.end_round(false);
  c.end_round(false);
  Health h = c.health();
  CHECK(h.unattributed == 1);
  CHECK(h.unattributed_ns == 700);
  CHECK(h.unattributed_names["triton_poi_fused_add_0"] == 1);
  CHECK(c.by_signature().empty());
}

TEST_CASE("unfinished records from a forced flush are dropped and counted; final settles everything") {
  Collector c;
  c.begin(kT0);
  c.add_external(1, make_external_id(2, 1));
  c.add_external(2, make_external_id(2, 2));
  c.add_activity(kernel(1, kT0 + 10, 100), kT0 + 1000);
  auto running = kernel(2, kT0 + 200, 0);
  running.end = 0;
  c.add_activity(running, kT0 + 1000);
  c.add_external(3, make_external_id(2, 3));
  c.add_activity(kernel(3, kT0 + 400, 50), kT0 + 1000);
  c.end_round(true);
  CHECK(c.health().unfinished == 1);
  CHECK(c.health().calls_incomplete == 1);
  CHECK(c.by_signature()[2].per_call.count() == 2);
  CHECK(c.by_signature()[2].per_call.total() == 150);
}

TEST_CASE("timestamps outside the session's clock stop timing and keep what was settled") {
  Collector c;
  c.begin(kT0);
  c.add_external(1, make_external_id(4, 1));
  c.add_activity(kernel(1, kT0 + 10, 100), kT0 + 1000);
  c.end_round(true);
  // TSC ticks (what torch.profiler's timestamp callback switches CUPTI to) are far below ns since 1970.
  c.add_external(2, make_external_id(4, 2));
  c.add_activity(kernel(2, 3'000'000'000'000ull, 230), kT0 + 2000);
  c.end_round(true);
  CHECK(c.stopped());
  CHECK(c.health().bad_clock == 1);
  CHECK(c.by_signature()[4].per_call.count() == 1);  // the good call only
  c.add_external(3, make_external_id(4, 3));
  c.add_activity(kernel(3, kT0 + 5000, 100), kT0 + 9000);
  c.end_round(true);
  CHECK(c.by_signature()[4].per_call.count() == 1);  // nothing after the stop
  // end before start is a clock error too
  Collector d;
  d.begin(kT0);
  auto bad = kernel(1, kT0 + 500, 0);
  bad.end = kT0 + 100;
  d.add_activity(bad, kT0 + 1000);
  CHECK(d.stopped());
}

TEST_CASE("the timer pushes the innermost op's id and attributes its kernels") {
  Rig r;
  REQUIRE(r.timer->start(""));
  CHECK(r.log->enables == 1);
  CHECK(r.timer->status() == "on");
  REQUIRE(r.timer->op_start(7));  // aten::linear
  r.cupti->launch("outer_kernel", 1000);
  REQUIRE(r.timer->op_start(8));  // aten::addmm inside it
  r.cupti->launch("_Z4gemmv", 5000);
  r.cupti->launch("_Z4gemmv", 3000);
  r.timer->op_end();
  r.timer->op_end();
  CHECK(r.log->pushes == 2);
  CHECK(r.log->pops == 2);
  CHECK(signature_of(r.log->pushed[0]) == 7);
  CHECK(signature_of(r.log->pushed[1]) == 8);
  CHECK(r.log->pushed[0] != r.log->pushed[1]);
  r.timer->round();
  r.timer->finish();
  CHECK(r.log->forced == 1);
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[7].per_call.total() == 1000);
  CHECK(sigs[8].per_call.total() == 8000);
  CHECK(sigs[8].per_call.count() == 1);
  CHECK(sigs[8].kernels["gemm()"] == 2);
  CHECK(r.warnings.empty());
  // After finish nothing touches CUPTI.
  const int flushes = r.log->flushes;
  r.timer->round();
  CHECK_FALSE(r.timer->op_start(7));
  CHECK(r.log->flushes == flushes);
}

TEST_CASE("a profiler that holds CUPTI keeps timing off, said once") {
  Rig r;
  CHECK_FALSE(r.timer->start("torch.profiler (or another CUPTI client) registered its buffers first"));
  CHECK_FALSE(r.timer->start(""));  // no second attempt
  CHECK(r.log->enables == 0);
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].find("device timing is off: torch.profiler") == 0);
  CHECK(r.timer->status().rfind("off: torch.profiler", 0) == 0);
  CHECK_FALSE(r.timer->op_start(1));
  CHECK(r.log->pushes == 0);
}

TEST_CASE("CUPTI refusing to enable turns timing off with its error") {
  Rig r;
  r.cupti->enable_error = "cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_NOT_INITIALIZED";
  CHECK_FALSE(r.timer->start(""));
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].find("CUPTI_ERROR_NOT_INITIALIZED") != std::string::npos);
  CHECK(r.log->disables == 1);
}

TEST_CASE("a takeover mid-run: ours are collected first, then timing stops; pops stay balanced") {
  Rig r;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("before", 400);
  r.timer->op_end();
  REQUIRE(r.timer->op_start(2));  // in flight when the profiler starts
  r.timer->taken_over("torch.profiler (or another CUPTI client) took over CUPTI's activity buffers");
  r.timer->op_end();
  CHECK(r.log->pops == r.log->pushes);
  CHECK(r.log->disables == 1);
  CHECK_FALSE(r.timer->op_start(3));
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].find("device timing stopped: torch.profiler") == 0);
  r.timer->taken_over("again");
  CHECK(r.warnings.size() == 1);
  r.timer->finish();
  // The record collected before the takeover is kept (the final round settles it).
  CHECK(r.timer->collector().by_signature()[1].per_call.total() == 400);
  CHECK(r.timer->status().rfind("stopped: torch.profiler", 0) == 0);
}

TEST_CASE("a forked child never calls CUPTI") {
  Rig r;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.timer->forget();
  r.timer->op_end();
  r.timer->round();
  r.timer->finish();
  CHECK_FALSE(r.timer->op_start(1));
  CHECK(r.log->pops == 0);
  CHECK(r.log->flushes == 0);
}

TEST_CASE("kernels still running at exit are dropped and counted, not timed as zero") {
  Rig r;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("done", 100);
  r.cupti->launch("still running", 100, 7, /*finished=*/false);
  r.timer->op_end();
  REQUIRE(r.timer->op_start(2));
  r.cupti->launch("done", 300);
  r.timer->op_end();
  r.timer->finish();
  CHECK(r.timer->collector().health().unfinished == 1);
  CHECK(r.timer->collector().health().calls_incomplete == 1);
  // The call with a running kernel is not timed at all (its sum would be short); the other is.
  CHECK(r.timer->collector().by_signature()[1].per_call.count() == 0);
  CHECK(r.timer->collector().by_signature()[2].per_call.total() == 300);
}

TEST_CASE("sampled timing: calls inside a window are timed, calls cut by an edge are left out") {
  Rig r({}, Sampling::windows(10, 100));
  CHECK(r.timer->sampling().describe() == "10 ms of every 100 ms");
  REQUIRE(r.timer->start(""));
  CHECK(r.timer->windows() == 1);  // the first window opens with start()

  REQUIRE(r.timer->op_start(1));  // inside the first window
  r.cupti->launch("inside", 100);
  r.timer->op_end();

  REQUIRE(r.timer->op_start(2));  // the window closes during it
  r.cupti->launch("before the edge", 200);
  REQUIRE(r.timer->window(false));
  r.cupti->launch("after the edge", 200);
  r.timer->op_end();
  CHECK(r.log->records_off == 1);

  REQUIRE(r.timer->op_start(3));  // entirely between windows: nothing recorded, nothing cut
  r.cupti->launch("between", 300);
  r.timer->op_end();

  REQUIRE(r.timer->op_start(4));  // a window opens during it
  r.cupti->launch("before the edge", 400);
  REQUIRE(r.timer->window(true));
  r.cupti->launch("after the edge", 400);
  r.timer->op_end();
  CHECK(r.log->records_on == 1);
  CHECK(r.timer->windows() == 2);
  CHECK(r.timer->window(true));  // already open: nothing happens
  CHECK(r.log->records_on == 1);

  REQUIRE(r.timer->op_start(1));  // inside the second window
  r.cupti->launch("inside", 150);
  r.timer->op_end();
  r.timer->finish();

  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 2);
  CHECK(sigs[1].per_call.total() == 250);
  CHECK(sigs[2].per_call.count() == 0);  // cut: 200 of its 400 ns were recorded, so none is kept
  CHECK(sigs[3].per_call.count() == 0);
  CHECK(sigs[4].per_call.count() == 0);
  const Health h = r.timer->collector().health();
  CHECK(h.calls_cut == 2);
  CHECK(h.calls_timed == 2);
  CHECK(h.unattributed == 0);
  CHECK(r.log->pops == r.log->pushes);
}

TEST_CASE("sampled timing: a call cut after its records were collected is still left out") {
  Rig r({}, Sampling::windows(10, 100));
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(5));
  r.cupti->launch("early", 100);
  r.timer->round();  // its record reaches the collector while the call runs
  REQUIRE(r.timer->window(false));
  r.timer->op_end();
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[5].per_call.count() == 0);
  CHECK(r.timer->collector().health().calls_cut == 1);
}

TEST_CASE("sampled timing: CUPTI refusing a window stops timing and says why") {
  Rig r({}, Sampling::windows(10, 100));
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("kept", 100);
  r.timer->op_end();
  r.cupti->record_error = "cuptiActivityDisable(kind 10) failed: CUPTI_ERROR_UNKNOWN (999)";
  CHECK_FALSE(r.timer->window(false));
  CHECK_FALSE(r.timer->active());
  CHECK_FALSE(r.timer->window(true));  // the sampler thread ends
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].find("device timing stopped: sampled timing could not close a window: ") == 0);
  CHECK(r.warnings[0].find("CUPTI_ERROR_UNKNOWN") != std::string::npos);
  CHECK(r.timer->status().rfind("stopped: sampled timing could not close a window", 0) == 0);
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[1].per_call.total() == 100);
}

TEST_CASE("sampled timing detaches CUPTI between windows once the window's records are in") {
  Rig r({}, Sampling::windows(10, 100));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("behind", 100, 7, true, 3);  // the device runs it after three more looks
  r.timer->op_end();
  const auto generous = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  REQUIRE(r.timer->window(false, generous));
  CHECK(r.cupti->is_detached);
  CHECK(r.timer->detaches() == 1);
  CHECK(r.log->flushes >= 4);  // three looks until its record came, then the last one (forced)
  CHECK(r.log->forced == 1);
  CHECK(std::chrono::steady_clock::now() < generous);  // it did not wait out the drain time

  REQUIRE(r.timer->op_start(2));  // between windows: CUPTI is not there
  r.cupti->launch("between", 300);
  r.timer->op_end();
  r.timer->round();  // the periodic collection leaves a detached CUPTI alone

  REQUIRE(r.timer->window(true));  // attached again
  CHECK(r.log->attaches == 1);
  CHECK_FALSE(r.cupti->is_detached);
  CHECK(r.log->records_on == 0);
  CHECK(r.timer->windows() == 2);
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("inside", 150);
  r.timer->op_end();
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 2);
  CHECK(sigs[1].per_call.total() == 250);
  CHECK(sigs[2].per_call.count() == 0);
  const Health h = r.timer->collector().health();
  CHECK(h.calls_incomplete == 0);
  CHECK(h.unattributed == 0);
}

TEST_CASE("sampled timing: work still running when the drain time is up is left out, not timed short") {
  Rig r({}, Sampling::windows(10, 100));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("done", 100);
  r.cupti->launch("still running", 100, 7, false);
  r.timer->op_end();
  REQUIRE(r.timer->op_start(2));
  r.cupti->launch("done", 50);
  r.timer->op_end();
  REQUIRE(r.timer->window(false, std::chrono::steady_clock::now() + std::chrono::milliseconds(5)));
  CHECK(r.timer->detaches() == 1);
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 0);  // 100 of its 200 ns were recorded: not kept
  CHECK(sigs[2].per_call.total() == 50);
  CHECK(r.timer->collector().health().calls_incomplete == 1);
}

TEST_CASE("sampled timing: with no launch to detach at, CUPTI stays attached with its records off") {
  Rig r({}, Sampling::windows(10, 100));
  r.cupti->detachable = true;
  r.cupti->launch_comes = false;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->window(false, std::chrono::steady_clock::now()));
  CHECK(r.timer->detaches() == 0);
  CHECK_FALSE(r.cupti->is_detached);
  CHECK(r.log->records_off == 1);
  REQUIRE(r.timer->window(true));
  CHECK(r.log->records_on == 1);  // opened by turning records on; nothing to attach
  CHECK(r.log->attaches == 0);
}

TEST_CASE("sampled timing: a takeover while CUPTI is detached stops timing and keeps what was timed") {
  Rig r({}, Sampling::windows(10, 100));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("k", 100);
  r.timer->op_end();
  REQUIRE(r.timer->window(false, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
  REQUIRE(r.cupti->is_detached);
  const int flushes = r.log->flushes, disables = r.log->disables;
  r.timer->taken_over("torch.profiler registered its CUPTI buffers");
  CHECK_FALSE(r.timer->active());
  CHECK_FALSE(r.timer->window(true));  // not attached again: the sampler thread ends
  CHECK(r.log->attaches == 0);
  CHECK(r.log->flushes == flushes);  // CUPTI untouched (any call would attach it again)
  CHECK(r.log->disables == disables);
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[1].per_call.total() == 100);
  CHECK(r.timer->status().rfind("stopped: torch.profiler registered its CUPTI buffers", 0) == 0);
}

namespace {
// One call of `sig` launching one kernel of `ns`.
void call(Rig& r, uint32_t sig, uint64_t ns) {
  REQUIRE(r.timer->op_start(sig));
  r.cupti->launch("k" + std::to_string(sig), ns);
  r.timer->op_end();
}
const auto kLater = CuptiSession::kPatience + std::chrono::milliseconds(1);
}  // namespace

TEST_CASE("first-calls timing: each signature's first calls, CUPTI detached once all have them") {
  Rig r({}, Sampling::first_calls(2, 0));
  r.cupti->detachable = true;
  CHECK(r.timer->sampling().describe() == "first 2 calls of each signature");
  CHECK(std::string(r.timer->sampling().mode_name()) == "first-calls");
  REQUIRE(r.timer->start(""));
  const auto now = std::chrono::steady_clock::now();
  call(r, 1, 100);
  call(r, 2, 50);
  CHECK(r.timer->signatures_short() == 2);
  REQUIRE(r.timer->tick(now));  // the first window stays open a while: the program is starting
  CHECK_FALSE(r.cupti->is_detached);
  call(r, 1, 100);
  call(r, 2, 50);
  CHECK(r.timer->signatures_short() == 0);
  REQUIRE(r.timer->tick(now + kLater));  // nothing wants more: closed and detached
  CHECK(r.cupti->is_detached);
  CHECK(r.timer->detaches() == 1);
  for (int k = 0; k < 5; ++k) call(r, 1, 100);  // detached: not timed, nothing attached for them
  CHECK(r.log->attaches == 0);

  // A signature first seen now: its very first call attaches CUPTI again and is timed.
  call(r, 3, 70);
  CHECK(r.log->attaches == 1);
  CHECK(r.timer->windows() == 2);
  call(r, 1, 100);  // while open, others are timed too
  call(r, 3, 70);
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now()));  // 3 has its calls: closed at once
  CHECK(r.timer->detaches() == 2);

  // Another first sight within a second of the last: not worth attaching for (it may never come
  // again, as a step-dependent scalar's signature does not); when it comes again, it is.
  call(r, 4, 90);
  CHECK(r.log->attaches == 1);
  call(r, 4, 90);
  CHECK(r.log->attaches == 2);
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 3);
  CHECK(sigs[2].per_call.count() == 2);
  CHECK(sigs[3].per_call.count() == 2);
  CHECK(sigs[3].per_call.total() == 140);
  CHECK(sigs[4].per_call.count() == 1);
  const Health h = r.timer->collector().health();
  CHECK(h.calls_cut == 0);
  CHECK(h.unattributed == 0);
  CHECK(r.timer->control_ns() > 0);
}

TEST_CASE("first-calls timing: signatures seen once do not keep a window open") {
  Rig r({}, Sampling::first_calls(5, 0));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  const auto now = std::chrono::steady_clock::now();
  for (uint32_t step = 0; step < 3; ++step) {
    call(r, 1, 100);          // every step
    call(r, 100 + step, 10);  // a new signature every step (AdamW's step size)
  }
  REQUIRE(r.timer->tick(now + kLater));  // 1 still wants two: open
  CHECK_FALSE(r.cupti->is_detached);
  call(r, 1, 100);
  call(r, 1, 100);
  call(r, 103, 10);
  REQUIRE(r.timer->tick(now + kLater));  // 1 has its five; 100..103 were seen once each
  CHECK(r.cupti->is_detached);
  CHECK(r.timer->signatures_short() == 4);
}

TEST_CASE("first-calls timing: a window no wanted signature uses closes after the patience") {
  Rig r({}, Sampling::first_calls(3, 0));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  call(r, 1, 100);
  call(r, 1, 100);  // repeats, and wants one more, but does not come again for now
  const auto now = std::chrono::steady_clock::now();
  REQUIRE(r.timer->tick(now + kLater));  // progress since the last look: still open
  CHECK_FALSE(r.cupti->is_detached);
  REQUIRE(r.timer->tick(now + 3 * kLater));
  CHECK(r.cupti->is_detached);
  CHECK(r.timer->signatures_short() == 1);
  call(r, 1, 100);  // comes again: attaches, and is timed
  CHECK(r.log->attaches == 1);
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[1].per_call.count() == 3);
}

TEST_CASE("first-calls timing: a running wanted call keeps the window open; one cut is not counted") {
  Rig r({}, Sampling::first_calls(1, 0));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  call(r, 1, 100);
  REQUIRE(r.timer->op_start(2));  // wanted, running
  r.cupti->launch("before", 100);
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now()));
  CHECK_FALSE(r.cupti->is_detached);  // not closed under it (before the patience runs out)
  REQUIRE(r.timer->window(false, std::chrono::steady_clock::now() + std::chrono::seconds(1)));  // cut anyway
  r.cupti->launch("after", 100);
  r.timer->op_end();
  CHECK(r.timer->signatures_short() == 1);  // still wants its call
  call(r, 2, 80);                           // attaches again: this one is whole
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[2].per_call.count() == 1);
  CHECK(sigs[2].per_call.total() == 80);
  CHECK(r.timer->collector().health().calls_cut == 1);
}

TEST_CASE("first-calls timing: every refresh, each signature wants one more call") {
  Rig r({}, Sampling::first_calls(1, 1000));
  r.cupti->detachable = true;
  CHECK(r.timer->sampling().describe() == "first 1 calls of each signature, one more every 1 s");
  REQUIRE(r.timer->start(""));
  call(r, 1, 100);
  call(r, 2, 100);
  const auto now = std::chrono::steady_clock::now();
  REQUIRE(r.timer->tick(now + kLater));
  REQUIRE(r.cupti->is_detached);
  call(r, 1, 100);  // has its call: stays detached
  CHECK(r.log->attaches == 0);
  REQUIRE(r.timer->tick(now + std::chrono::seconds(2)));  // refresh: both want one more
  CHECK(r.timer->signatures_short() == 2);
  CHECK(r.cupti->is_detached);  // nothing opens before a wanted call starts
  call(r, 1, 120);
  CHECK(r.log->attaches == 1);
  call(r, 2, 130);
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 2);
  CHECK(sigs[2].per_call.count() == 2);
}

TEST_CASE("signature wants: first sight, repeats, credits, refresh, and the counts of signatures short") {
  using Want = SignatureWants::Want;
  SignatureWants w(2);
  CHECK(w.wants(7) == Want::First);
  CHECK(w.seen() == 1);
  CHECK(w.short_of() == 1);
  CHECK(w.short_repeating() == 0);
  CHECK(w.wants(7) == Want::Again);  // seen again: it repeats
  CHECK(w.seen() == 1);
  CHECK(w.short_repeating() == 1);
  CHECK(w.credit(7));
  CHECK(w.credit(7));
  CHECK_FALSE(w.credit(7));  // had what it wanted
  CHECK(w.wants(7) == Want::No);
  CHECK(w.short_of() == 0);
  CHECK(w.short_repeating() == 0);
  CHECK(w.wants(9) == Want::First);
  CHECK_FALSE(w.credit(9));  // counted, but a signature seen once is no progress
  CHECK(w.short_of() == 1);
  CHECK_FALSE(w.credit(11));  // never seen: nothing to credit
  CHECK(w.refresh() == 1);    // only 7 had what it wanted
  CHECK(w.short_of() == 2);
  CHECK(w.short_repeating() == 1);
  CHECK(w.credit(7));
  CHECK(w.short_repeating() == 0);
  CHECK(w.wants((1u << 24) - 2) == Want::First);  // the largest ids have a place too
  CHECK(w.wants(1u << 24) == Want::No);            // past the id range: never wanted
}

TEST_CASE("signature wants: threads calling and crediting at once keep the counts whole") {
  SignatureWants w(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&w] {
      for (int round = 0; round < 8; ++round)
        for (uint32_t sig = 0; sig < 5000; ++sig)
          if (w.wants(sig) != SignatureWants::Want::No) w.credit(sig);
    });
  for (auto& t : threads) t.join();
  CHECK(w.seen() == 5000);
  CHECK(w.short_of() == 0);  // each wanted 3, and 32 calls came
  CHECK(w.short_repeating() == 0);
  CHECK(w.refresh() == 5000);
  CHECK(w.short_of() == 5000);
  CHECK(w.short_repeating() == 5000);
}

TEST_CASE("CUPTI's overhead records are added up") {
  Collector c;
  c.add_overhead(1500);
  c.add_overhead(500);
  CHECK(c.health().overhead_records == 2);
  CHECK(c.health().overhead_ns == 2000);
}

TEST_CASE("without sampling windows are never toggled and every call is timed") {
  Rig r;
  CHECK(r.timer->sampling().describe().empty());
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));
  r.cupti->launch("k", 100);
  r.timer->op_end();
  r.timer->finish();
  CHECK(r.log->records_off == 0);
  CHECK(r.timer->collector().health().calls_cut == 0);
  CHECK(r.timer->collector().by_signature()[1].per_call.count() == 1);
}

TEST_CASE("the timeline has torch.profiler's categories, keys and launch-to-kernel flows") {
  CollectorOptions o;
  o.timeline = true;
  Rig r(o);
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(3));
  const uint32_t corr = r.cupti->launch("_Z4reluPf", 2500, 13);
  r.timer->op_end();
  r.cupti->launch("orphan", 100, 14);  // outside any op
  r.timer->finish();

  OpLabel relu{"aten::relu", "[[2, 3]]", "[\"float\"]"};
  TimelineInfo info;
  info.pid = 4242;
  info.trace_name = "python train.py";
  info.label = [&](uint32_t sig) { return sig == 3 ? &relu : nullptr; };
  std::ostringstream out;
  write_timeline(out, r.timer->collector().timeline(), info);
  auto j = nlohmann::json::parse(out.str());
  CHECK(j["schemaVersion"] == 1);
  const auto& ev = j["traceEvents"];
  auto find = [&](const std::string& cat, const std::string& name) -> const nlohmann::json* {
    for (const auto& e : ev)
      if (e.value("cat", "") == cat && e.value("name", "") == name) return &e;
    return nullptr;
  };
  const auto* op = find("cpu_op", "aten::relu");
  REQUIRE(op);
  CHECK((*op)["pid"] == 4242);
  CHECK((*op)["args"]["Input Dims"] == nlohmann::json::parse("[[2, 3]]"));
  const auto* k = find("kernel", "relu(float*)");
  REQUIRE(k);
  CHECK((*k)["pid"] == 0);
  CHECK((*k)["tid"] == 13);
  CHECK((*k)["args"]["External id"] == (*op)["args"]["External id"]);
  CHECK((*k)["args"]["correlation"] == corr);
  CHECK((*k)["dur"].get<double>() == Approx(2.5));
  CHECK((*k)["ts"].get<double>() >= (*op)["ts"].get<double>());
  const auto* launch = find("cuda_runtime", "cudaLaunchKernel");
  REQUIRE(launch);
  int starts = 0, finishes = 0;
  for (const auto& e : ev) {
    if (e.value("cat", "") != "ac2g") continue;
    if (e["id"] != corr) continue;
    if (e["ph"] == "s") {
      ++starts;
      CHECK(e["pid"] == 4242);
    }
    if (e["ph"] == "f") {
      ++finishes;
      CHECK(e["tid"] == 13);
      CHECK(e["bp"] == "e");
    }
  }
  CHECK(starts == 1);
  CHECK(finishes == 1);
  const auto* orphan = find("kernel", "orphan");
  REQUIRE(orphan);
  CHECK((*orphan)["args"]["External id"] == 0);
}

TEST_CASE("the timeline is capped: events past the limit are counted, not kept") {
  CollectorOptions o;
  o.timeline = true;
  o.timeline_max_events = 3;
  Rig r(o);
  REQUIRE(r.timer->start(""));
  for (int k = 0; k < 10; ++k) {
    REQUIRE(r.timer->op_start(1));
    r.cupti->launch("k", 100);
    r.timer->op_end();
  }
  r.timer->finish();
  auto t = r.timer->collector().timeline();
  CHECK(t.ops.size() == 3);
  CHECK(t.api.size() == 3);
  CHECK(t.activities.size() == 3);
  CHECK(t.dropped_events == 21);
  CHECK(r.timer->collector().by_signature()[1].per_call.count() == 10);  // statistics are not capped
}

TEST_CASE("busy time over several streams counts overlaps once") {
  CHECK(busy_ns({}) == 0);
  CHECK(busy_ns({{100, 200}}) == 100);
  CHECK(busy_ns({{100, 200}, {150, 300}}) == 200);              // overlapping streams
  CHECK(busy_ns({{100, 200}, {300, 350}}) == 150);              // a gap is not device time
  CHECK(busy_ns({{300, 350}, {100, 200}, {120, 130}}) == 150);  // any order, nested
  CHECK(busy_ns({{100, 200}, {200, 250}}) == 150);              // back to back
}

TEST_CASE("without attribution every activity goes to the timeline at once") {
  CollectorOptions o;
  o.attribute = false;
  o.timeline = true;
  Collector c(o);
  c.begin(kT0);
  c.add_activity(kernel(1, kT0 + 10, 100), kT0 + 1000);
  auto t = c.take_timeline();
  REQUIRE(t.activities.size() == 1);
  CHECK(t.activities[0].first.end - t.activities[0].first.start == 100);
  CHECK(c.take_timeline().activities.empty());
}
