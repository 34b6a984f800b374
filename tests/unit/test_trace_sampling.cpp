// Sampled tracing's decisions (tracer/trace_sampling.h), on a clock of the test's own.
#include <chrono>

#include "catch.h"
#include "tracer/trace_sampling.h"

using bb::tracer::TraceSampler;
using bb::tracer::TraceSamplingOptions;
using namespace std::chrono_literals;

namespace {

TraceSamplingOptions every(uint32_t n) {
  TraceSamplingOptions o;
  o.every = n;
  return o;  // settle 200 ms, new signatures at most 1% of calls, at least 1000 calls
}

// Steps every 10 ms from `t` for `ms`, `rate` calls and `fresh` new signatures per step; the last answer.
bool run(TraceSampler& s, TraceSampler::clock::time_point& t, uint64_t& calls, uint64_t& sigs, int ms, uint64_t rate,
         uint64_t fresh = 0, bool hold = false) {
  bool sampling = s.sampling();
  for (int k = 0; k < ms / 10; ++k) {
    t += 10ms;
    calls += rate;
    sigs += fresh;
    sampling = s.step(t, calls, sigs, hold);
  }
  return sampling;
}

}  // namespace

TEST_CASE("sampling starts once the signatures seen have been stable for the settling time") {
  auto t = TraceSampler::clock::time_point{} + 1000s;
  TraceSampler s(every(16), t);
  uint64_t calls = 0, sigs = 0;
  CHECK_FALSE(run(s, t, calls, sigs, 300, 100, 5));  // every step brings new signatures: 5% of calls
  CHECK_FALSE(run(s, t, calls, sigs, 150, 100));     // stable, but not yet for 200 ms
  CHECK(run(s, t, calls, sigs, 100, 100));           // now it has been
  const auto r = s.report();
  CHECK(r.to_sampled == 1);
  CHECK(r.scale == 16);
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].what.rfind("sampled: ", 0) == 0);
  CHECK(r.full_s >= 0.45);  // traced whole until it switched, within the last 100 ms
  CHECK(r.full_s <= 0.5);
}

TEST_CASE("a program that makes few calls is traced whole: too few calls to call it stable") {
  auto t = TraceSampler::clock::time_point{} + 1000s;
  TraceSampler s(every(16), t);
  uint64_t calls = 0, sigs = 0;
  CHECK_FALSE(run(s, t, calls, sigs, 2000, 2));  // 400 calls in 200 ms: under min_calls
}

TEST_CASE("while something needs every call traced, tracing is not sampled, and it is again right after") {
  auto t = TraceSampler::clock::time_point{} + 1000s;
  TraceSampler s(every(8), t);
  uint64_t calls = 0, sigs = 0;
  CHECK_FALSE(run(s, t, calls, sigs, 1000, 100, 0, /*hold=*/true));
  CHECK(run(s, t, calls, sigs, 10, 100));                // stable all along: samples as soon as the hold ends
  CHECK_FALSE(run(s, t, calls, sigs, 30, 10, 0, true));  // a device-timing window opens
  CHECK(run(s, t, calls, sigs, 10, 100));                // and closes: nothing new meanwhile, so back at once
  CHECK_FALSE(run(s, t, calls, sigs, 30, 10, 0, true));
  CHECK_FALSE(run(s, t, calls, sigs, 10, 100, 50));  // new signatures while held: settle again
  CHECK_FALSE(run(s, t, calls, sigs, 150, 100));
  CHECK(run(s, t, calls, sigs, 60, 100));
  const auto r = s.report();
  CHECK(r.to_sampled == 3);
  bool said_held = false;
  for (const auto& e : r.events) said_held = said_held || e.what.find("device timing or routing") != std::string::npos;
  CHECK(said_held);
}

TEST_CASE("new signatures among the sampled calls bring every call back, until stable again") {
  auto t = TraceSampler::clock::time_point{} + 1000s;
  TraceSampler s(every(16), t);
  uint64_t calls = 0, sigs = 0;
  REQUIRE(run(s, t, calls, sigs, 300, 100));
  CHECK(run(s, t, calls, sigs, 500, 10));    // sampled calls, known signatures
  CHECK(run(s, t, calls, sigs, 20, 10, 0));  // one odd new signature is no change ...
  sigs += 1;
  CHECK(s.step(t += 10ms, calls += 10, sigs, false));
  CHECK_FALSE(run(s, t, calls, sigs, 30, 10, 1));  // ... a stream of them is: the program does something new
  CHECK_FALSE(run(s, t, calls, sigs, 100, 100));   // settles again
  CHECK(run(s, t, calls, sigs, 150, 100));
  CHECK(s.report().to_sampled == 2);
}

TEST_CASE("sampling off: never samples") {
  auto t = TraceSampler::clock::time_point{} + 1000s;
  TraceSampler s(every(1), t);
  uint64_t calls = 0, sigs = 0;
  CHECK_FALSE(run(s, t, calls, sigs, 2000, 1000));
  CHECK(s.report().to_sampled == 0);
}
