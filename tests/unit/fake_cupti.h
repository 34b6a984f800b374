// A fake CUPTI for the device-timing tests (test_device_time.cpp, test_sampled_timing.cpp): it behaves
// as the real one does for what the timer relies on (a per-thread external-id stack, a correlation id
// per launch, ExternalCorrelation and API records at launch time, device records later, buffers
// handed over on flush, records off, detach and attach).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "tracer/devtime/collector.h"
#include "tracer/devtime/cupti_session.h"

namespace bb::devtime::test {

inline constexpr uint64_t kT0 = 1'700'000'000'000'000'000ull;  // a realtime-like clock, ns

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
  bool restart_ids = false;      // correlation ids start over when CUPTI is attached again
  bool untracked_links = false;  // ties launches inside op calls it was not told of to kUntrackedCall
  bool inside_op = false;        // the program is inside an op call (the tracer's view)
  uint32_t last_link = 0;
  // Runs as the records go on (record(true) or attach()): what other threads do meanwhile.
  std::function<void()> while_turning_on;
  std::function<void()> while_turning_off;  // runs as the records go off (record(false)), before they are
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
    if (!on && while_turning_off) while_turning_off();
    recording = on;
    if (on && while_turning_on) while_turning_on();
    return "";
  }
  bool links_untracked() const override { return untracked_links; }
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
    if (restart_ids) next_corr = 1;
    is_detached = false;
    recording = true;
    if (while_turning_on) while_turning_on();
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
    if (!stack.empty() || (untracked_links && inside_op)) {
      externals.push_back({corr, stack.empty() ? kUntrackedCall : stack.back()});
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
  // untracked_links: as the real callback mode with the tracer's probe (CuptiApi::links_untracked).
  explicit Rig(CollectorOptions o = {}, Sampling sampling = {}, bool untracked_links = false) {
    auto c = std::make_unique<FakeCupti>();
    c->untracked_links = untracked_links;
    cupti = c.get();
    log = c->log;
    timer = std::make_unique<CuptiSession>(
        std::move(c), o, [this](const std::string& w) { warnings.push_back(w); }, sampling);
  }
};

inline DeviceActivity kernel(uint32_t corr, uint64_t start, uint64_t ns, const std::string& name = "k") {
  DeviceActivity a;
  a.correlation = corr;
  a.start = start;
  a.end = start + ns;
  a.name = name;
  return a;
}

}  // namespace bb::devtime::test
