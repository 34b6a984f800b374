// Sampled timing (windows) and first-calls timing without a GPU (tests/unit/fake_cupti.h): calls
// inside windows timed, calls cut by an edge left out, CUPTI detached and attached again, what each
// signature wants.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "fake_cupti.h"
#include "tracer/devtime/collector.h"
#include "tracer/devtime/cupti_session.h"
#include "tracer/devtime/signature_wants.h"

using namespace bb::devtime;
using namespace bb::devtime::test;

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

// Where calls between windows are followed (external-all, kernels-only, a timeline), a call that
// ends while a window's records are going on has part of its work recorded: it is never timed (it
// began outside an open window), its recorded launches are counted as untracked. One that begins
// then and ends inside the window is cut (and never timed either).
TEST_CASE("sampled timing: a call ending while a window opens is left out, not timed short") {
  for (const bool detachable : {false, true}) {
    Rig r({}, Sampling::windows(10, 100));
    r.cupti->detachable = detachable;
    REQUIRE(r.timer->start(""));
    REQUIRE(r.timer->op_start(1));
    r.cupti->launch("inside", 100);
    r.timer->op_end();
    REQUIRE(r.timer->window(false));
    CHECK(r.cupti->is_detached == detachable);

    REQUIRE(r.timer->op_start(6));  // between windows, followed
    r.cupti->launch("unrecorded", 600);
    bool ran = false;
    r.cupti->while_turning_on = [&] {  // another thread, while the window opens
      r.cupti->launch("recorded", 60);
      r.timer->op_end();
      REQUIRE(r.timer->op_start(7));
      r.cupti->launch("begun as the records went on", 70);
      ran = true;
    };
    REQUIRE(r.timer->window(true));
    REQUIRE(ran);
    r.cupti->launch("inside the window", 70);
    r.timer->op_end();

    REQUIRE(r.timer->op_start(1));  // inside the window
    r.cupti->launch("inside", 100);
    r.timer->op_end();
    r.timer->finish();

    auto sigs = r.timer->collector().by_signature();
    CHECK(sigs[1].per_call.count() == 2);
    CHECK(sigs[6].per_call.count() == 0);  // 60 of its 660 ns were recorded: none is kept
    CHECK(sigs[7].per_call.count() == 0);
    const Health h = r.timer->collector().health();
    CHECK(h.calls_cut == 1);
    CHECK(h.untracked_launches == 3);  // 6's recorded launch, 7's two
    CHECK(h.calls_timed == 2);
    CHECK(r.log->pops == r.log->pushes);
  }
}

// CUPTI switches its record kinds on (and off) one by one while linking is already on (still on): a
// call that begins and ends in that span has only part of its launches recorded. Such a call began
// outside an open window and is never timed (found in review, 2026-12-04).
TEST_CASE("sampled timing: a call begun and ended while the records go on or off is never timed") {
  SECTION("opening, calls between windows followed (timeline, external-all)") {
    Rig r({}, Sampling::windows(10, 100));
    REQUIRE(r.timer->start(""));
    REQUIRE(r.timer->window(false));
    r.cupti->while_turning_on = [&] {
      REQUIRE(r.timer->op_start(8));
      r.cupti->recording = false;  // this kind is not on yet
      r.cupti->launch("not yet recorded", 500);
      r.cupti->recording = true;
      r.cupti->launch("recorded", 50);
      r.timer->op_end();
    };
    REQUIRE(r.timer->window(true));
    r.timer->finish();
    CHECK(r.timer->collector().by_signature()[8].per_call.count() == 0);  // 50 of 550 ns recorded
    CHECK(r.timer->collector().health().untracked_launches == 1);
  }
  SECTION("opening, first calls: a wanted call on another thread while CUPTI attaches") {
    Rig r({}, Sampling::first_calls(5, 0, 0), /*untracked_links=*/true);
    r.cupti->detachable = true;
    REQUIRE(r.timer->start(""));
    REQUIRE(r.timer->window(false, std::chrono::steady_clock::now()));
    REQUIRE(r.cupti->is_detached);
    r.cupti->while_turning_on = [&] {
      std::thread other([&] {  // the window's lock is held: this call cannot open it, and is followed
        r.cupti->inside_op = true;
        REQUIRE(r.timer->op_start(9));
        r.cupti->recording = false;
        r.cupti->launch("not yet recorded", 500);
        r.cupti->recording = true;
        r.cupti->launch("recorded", 50);
        r.timer->op_end();
        r.cupti->inside_op = false;
      });
      other.join();
    };
    REQUIRE(r.timer->window(true, {}, "asked by a call"));
    r.timer->finish();
    CHECK(r.timer->collector().by_signature()[9].per_call.count() == 0);
  }
  SECTION("closing") {
    Rig r({}, Sampling::windows(10, 100));
    REQUIRE(r.timer->start(""));
    r.cupti->while_turning_off = [&] {
      REQUIRE(r.timer->op_start(10));
      r.cupti->launch("still recorded", 40);
      r.cupti->recording = false;  // the kernel kind is off now
      r.cupti->launch("not recorded", 400);
      r.cupti->recording = true;
      r.timer->op_end();
    };
    REQUIRE(r.timer->window(false));
    r.timer->finish();
    CHECK(r.timer->collector().by_signature()[10].per_call.count() == 0);  // 40 of 440 ns recorded
  }
}

// Nothing promises that CUPTI's correlation ids keep growing across a detach and an attach: a link
// of before whose record never came must not claim a new launch's record.
TEST_CASE("sampled timing: links of before a detach never meet the records of after it") {
  Rig r({}, Sampling::windows(10, 100));
  r.cupti->detachable = true;
  r.cupti->restart_ids = true;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(2));
  r.cupti->launch("its record is lost", 100);
  r.cupti->activities.clear();
  r.timer->op_end();
  REQUIRE(r.timer->window(false, std::chrono::steady_clock::now()));
  REQUIRE(r.cupti->is_detached);
  REQUIRE(r.timer->window(true));
  r.cupti->launch("outside any op, same correlation id", 50);
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[2].per_call.count() == 0);
  CHECK(r.timer->collector().health().unattributed == 1);
}

// Sampled tracing (BB_TRACE_SAMPLE) sees one call in N for a moment after a window opens: calls
// inside a call it saw may go unseen, and their launches would count as its own (found in review).
TEST_CASE("first-calls timing: a call begun while sampled tracing saw one call in N is never timed") {
  Rig r({}, Sampling::first_calls(2, 0, 0), /*untracked_links=*/true);
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(3, /*whole=*/false));  // aten::linear, seen; its addmm was not
  r.cupti->launch("addmm's kernel", 300);
  r.timer->op_end();
  REQUIRE(r.timer->op_start(3));
  r.cupti->launch("linear's own", 100);
  r.timer->op_end();
  r.timer->finish();
  const auto& t = r.timer->collector().by_signature()[3].per_call;
  CHECK(t.count() == 1);
  CHECK(t.total() == 100);
  CHECK(r.timer->collector().health().untracked_launches == 1);
  CHECK(r.timer->signatures_short() == 1);  // the first call did not count towards its two
}

// A call whose first records came two rounds before it ended, and that a window's edge then cut:
// had they been taken as the whole call, op_end's exclusion would come too late (found in review).
TEST_CASE("sampled timing: a long call's early records do not make it final while it runs") {
  Rig r({}, Sampling::windows(5, 50));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(5));  // e.g. a call waiting on a collective between its kernels
  r.cupti->launch("first kernel", 100);
  for (int w = 0; w < 3; ++w) {  // three closes, each ending a round
    REQUIRE(r.timer->window(false, std::chrono::steady_clock::now()));
    REQUIRE(r.timer->window(true));
  }
  r.cupti->launch("second kernel", 900);
  r.timer->op_end();
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[5].per_call.count() == 0);
  CHECK(r.timer->collector().health().calls_cut == 1);
}

// First calls: a call counts towards what its signature wants when it ends, before its records are
// in; if they come back unfinished (the drain's time ran out) it is not timed, and the signature must
// want it again (found in review).
TEST_CASE("first-calls timing: a wanted call left out as incomplete is wanted again") {
  Rig r({}, Sampling::first_calls(2, 0, 0), /*untracked_links=*/true);
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  for (int i = 0; i < 2; ++i) {
    REQUIRE(r.timer->op_start(1));
    r.cupti->launch("queued behind the GPU", 100, 7, /*finished=*/false);
    r.timer->op_end();
  }
  REQUIRE(r.timer->signatures_short() == 0);
  REQUIRE(r.timer->window(false, std::chrono::steady_clock::now()));  // the drain ran out: forced flush
  CHECK(r.timer->collector().health().calls_incomplete == 2);
  CHECK(r.timer->signatures_short() == 1);
  REQUIRE(r.timer->op_start(1));  // wanted again: it opens a window
  r.cupti->launch("timed", 100);
  r.timer->op_end();
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[1].per_call.count() == 1);
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
  const auto ev = r.timer->events();  // and the trace says so
  REQUIRE(ev.size() == 4);
  CHECK(ev[0].what == "open: start");
  CHECK(ev[1].what == "close: period");
  CHECK(ev[2].what == "not detached: no launch within 20 ms (attached, records off, until the next window)");
  CHECK(ev[3].what == "open: period");
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
// First-calls sampling; by default a signature seen twice repeats and every first sight may open a window.
Sampling first_calls(uint32_t calls, uint32_t refresh_ms = 0, uint32_t repeat_gap_ms = 0,
                     uint32_t first_sight_gap_ms = 0) {
  Sampling s = Sampling::first_calls(calls, refresh_ms, repeat_gap_ms);
  s.first_sight_gap_ms = first_sight_gap_ms;
  return s;
}
}  // namespace

TEST_CASE("first-calls timing: each signature's first calls, CUPTI detached once all have them") {
  Rig r({}, first_calls(2));
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
  r.timer->finish();
  std::vector<std::string> what;  // what the windows did, in order, as the trace will say
  double last = 0;
  for (const auto& e : r.timer->events()) {
    what.push_back(e.what);
    CHECK(e.t >= last);
    last = e.t;
  }
  const std::vector<std::string> expected{"open: start",
                                          "close: no signature wants more",
                                          "detached",
                                          "open: first sight (attached)",
                                          "close: no signature wants more",
                                          "detached"};
  CHECK(what == expected);
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 3);
  CHECK(sigs[2].per_call.count() == 2);
  CHECK(sigs[3].per_call.count() == 2);
  CHECK(sigs[3].per_call.total() == 140);
  const Health h = r.timer->collector().health();
  CHECK(h.calls_cut == 0);
  CHECK(h.unattributed == 0);
  CHECK(r.timer->control_ns() > 0);
}

TEST_CASE("first-calls timing: a first sight opens a window at most once per first_sight_gap_ms") {
  Rig r({}, first_calls(2, 0, 0, 300));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  call(r, 1, 100);
  call(r, 1, 100);
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now() + kLater));
  REQUIRE(r.cupti->is_detached);
  // Within the gap of the first window's opening: not worth attaching for (it may never come again,
  // as a step-dependent scalar's signature does not); when it comes again, it repeats, and is.
  call(r, 4, 90);
  CHECK(r.log->attaches == 0);
  call(r, 4, 90);
  CHECK(r.log->attaches == 1);
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now()));  // 4 wants one more and a wanted call began: open
  // 4 repeats and wants one more: the window waits for it, kPatience at most.
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now() + CuptiSession::kLinger));
  CHECK_FALSE(r.cupti->is_detached);
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now() + kLater));
  REQUIRE(r.cupti->is_detached);
  std::this_thread::sleep_for(std::chrono::milliseconds(310));  // past the gap: a first sight opens
  call(r, 5, 30);
  CHECK(r.log->attaches == 2);
  call(r, 6, 30);  // while open: timed too, opening nothing
  CHECK(r.log->attaches == 2);
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[4].per_call.count() == 1);
  CHECK(sigs[5].per_call.count() == 1);
  CHECK(sigs[6].per_call.count() == 1);
}

TEST_CASE("first-calls timing: the first window waits for the first repeat, kFirstPatience at most") {
  Rig r({}, first_calls(3, 0, 0, 1000));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  const auto now = std::chrono::steady_clock::now();
  // A long first step (lazy initialization): first sights only, their wanted calls still coming.
  for (uint32_t k = 1; k <= 3; ++k) {
    call(r, k, 10);
    REQUIRE(r.timer->tick(now + k * kLater));  // no repeat yet: kPatience does not apply to it
    CHECK_FALSE(r.cupti->is_detached);
  }
  // Nothing ever repeats: closed once kFirstPatience has passed.
  call(r, 4, 10);
  REQUIRE(r.timer->tick(now + CuptiSession::kFirstPatience + kLater));
  CHECK(r.cupti->is_detached);
  r.timer->finish();
  bool patience = false;
  for (const auto& e : r.timer->events()) patience |= e.what.rfind("close: no repeating signature", 0) == 0;
  CHECK(patience);
}

TEST_CASE("first-calls timing: a window the patience closes names the repeating signatures still short") {
  Sampling s = first_calls(5, 0, 1);
  s.name_of = [](uint32_t sig) { return "aten::op" + std::to_string(sig) + "(float32[4])"; };
  Rig r({}, s);
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  call(r, 1, 10);
  // Past the repeat gap; so long that, absent since, it may still come (not retired: 2 x 200 ms + kLinger).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  call(r, 1, 10);  // repeats: 3 more wanted
  call(r, 2, 10);  // seen once: not repeating
  const auto now = std::chrono::steady_clock::now();
  REQUIRE(r.timer->tick(now));
  CHECK_FALSE(r.cupti->is_detached);
  REQUIRE(r.timer->tick(now + kLater));
  CHECK(r.cupti->is_detached);
  std::string close;
  for (const auto& e : r.timer->events())
    if (e.what.rfind("close:", 0) == 0) close = e.what;
  CHECK(close.find("no repeating signature timed for") != std::string::npos);
  CHECK(close.find("; still short: aten::op1(float32[4]) (3 more; seen first at ") != std::string::npos);
  CHECK(close.find("aten::op2") == std::string::npos);
  r.timer->finish();
}

TEST_CASE("first-calls timing: a repeating signature gone for twice its gaps holds the window no longer") {
  Sampling s = first_calls(5, 0, 1);
  s.name_of = [](uint32_t sig) { return "aten::op" + std::to_string(sig) + "()"; };
  Rig r({}, s);
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  call(r, 1, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  call(r, 1, 10);  // repeats, 3 short; its gap 3 ms
  // Past the first window's kPatience; the sampler sees the progress.
  const auto t1 = std::chrono::steady_clock::now() + CuptiSession::kPatience;
  REQUIRE(r.timer->tick(t1));
  CHECK_FALSE(r.cupti->is_detached);
  // kLinger without a wanted call: 1 has been away far longer than twice its gap: retired, and the
  // window closes long before kPatience.
  REQUIRE(r.timer->tick(t1 + CuptiSession::kLinger));
  CHECK(r.cupti->is_detached);
  std::vector<std::string> what;
  for (const auto& e : r.timer->events()) what.push_back(e.what);
  REQUIRE(what.size() >= 3);
  CHECK(what[1] == "retired 1 repeating signature not seen for over twice their gap: aten::op1()");
  CHECK(what[2] == "close: no wanted call for 20 ms");
  // It comes back: it repeats again at once, wants what it still wanted, and opens a window.
  call(r, 1, 10);
  CHECK(r.log->attaches == 1);
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[1].per_call.count() == 3);
}

TEST_CASE("signature wants: retiring the repeating signatures short of calls that stopped coming") {
  SignatureWants w(5, 1);
  for (uint32_t sig : {1u, 2u}) CHECK(w.wants(sig) == SignatureWants::Want::New);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  for (uint32_t sig : {1u, 2u}) CHECK(w.wants(sig) == SignatureWants::Want::Again);
  CHECK(w.short_repeating() == 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(w.wants(2) == SignatureWants::Want::Again);  // 2 still comes; 1 is 100 ms away, its gap 3 ms
  std::vector<uint32_t> shown;
  CHECK(w.retire_absent(std::chrono::steady_clock::now(), 20, 0, 3, &shown) == 1);
  CHECK(shown == std::vector<uint32_t>{1});
  CHECK(w.short_repeating() == 1);
  CHECK(w.short_of() == 2);  // still short, only no longer holding a window
  CHECK(w.retired() == 1);
  CHECK(w.retire_absent(std::chrono::steady_clock::now(), 20, 0, 3, &shown) == 0);
  // Back: repeating again at once, not counted twice as a signature that repeats.
  CHECK(w.wants(1) == SignatureWants::Want::Again);
  CHECK(w.short_repeating() == 2);
  CHECK(w.repeating() == 2);
  // Its gap is now the absence: not retired again that soon.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(w.retire_absent(std::chrono::steady_clock::now(), 20, 0, 3, &shown) == 0);
  for (int k = 0; k < 5; ++k) CHECK(w.credit(1));
  CHECK(w.short_repeating() == 1);
}

TEST_CASE("signature wants: a signature's gap is capped by the loop's recent gaps") {
  SignatureWants w(5, 1);
  CHECK(w.wants(1) == SignatureWants::Want::New);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // a slow first step
  CHECK(w.wants(1) == SignatureWants::Want::Again);             // its gap: 150 ms
  CHECK(w.recent_gap() >= 150);
  CHECK(w.take_recent_gap() >= 150);
  CHECK(w.recent_gap() == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  std::vector<uint32_t> shown;
  const auto now = std::chrono::steady_clock::now();
  CHECK(w.retire_absent(now, 20, 0, 3, &shown) == 0);    // 60 ms away: within twice its own gap
  CHECK(w.retire_absent(now, 20, 400, 3, &shown) == 0);  // a cap above its gap changes nothing
  CHECK(w.retire_absent(now, 20, 10, 3, &shown) == 1);   // the loop's gaps are 10 ms: gone
  CHECK(shown == std::vector<uint32_t>{1});
}

TEST_CASE("first-calls timing: signatures seen once are no progress; a window closes once wanted calls stop") {
  Rig r({}, first_calls(5));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  const auto now = std::chrono::steady_clock::now();
  for (uint32_t step = 0; step < 3; ++step) {
    call(r, 1, 100);          // every step
    call(r, 100 + step, 10);  // a new signature every step (AdamW's step size)
  }
  REQUIRE(r.timer->tick(now + kLater));  // wanted calls since the last look: open
  CHECK_FALSE(r.cupti->is_detached);
  call(r, 1, 100);
  call(r, 1, 100);
  call(r, 103, 10);
  REQUIRE(r.timer->tick(now + kLater));  // 1 has its five; 100..103 were seen once each, and came just now
  CHECK_FALSE(r.cupti->is_detached);
  REQUIRE(r.timer->tick(now + kLater + CuptiSession::kLinger));  // no wanted call began since: closed
  CHECK(r.cupti->is_detached);
  CHECK(r.timer->signatures_short() == 4);
  CHECK(r.timer->detaches() == 1);
}

// A training loop in real time: steps 70 ms apart, each calling the model's signatures once and making
// a signature of its own used twice (a step-dependent scalar's); repeat gap 60 ms.
TEST_CASE("first-calls timing: a step loop is timed in one window; signatures of one step never repeat") {
  Rig r({}, first_calls(3, 0, 60, 1000));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  const auto started = std::chrono::steady_clock::now();
  uint32_t steps = 0;
  for (; steps < 40; ++steps) {
    call(r, 1, 100);
    call(r, 2, 200);
    call(r, 100 + steps, 10);
    call(r, 100 + steps, 10);
    REQUIRE(r.timer->tick(std::chrono::steady_clock::now()));  // wanted calls came just now: open
    if (steps < 2) CHECK_FALSE(r.cupti->is_detached);
    std::this_thread::sleep_for(std::chrono::milliseconds(35));  // the step's other work: no wanted call
    REQUIRE(r.timer->tick(std::chrono::steady_clock::now()));
    std::this_thread::sleep_for(std::chrono::milliseconds(35));
    if (r.cupti->is_detached && std::chrono::steady_clock::now() - started > 2 * CuptiSession::kPatience) break;
  }
  CHECK(r.cupti->is_detached);  // the first window closed, once the first window's patience had passed
  CHECK(r.timer->detaches() == 1);
  CHECK(r.log->attaches == 0);  // the steps' own signatures opened nothing (within a second of the start)
  CHECK(r.timer->signatures_seen() == 2 + steps + 1);
  CHECK(r.timer->signatures_short() == steps + 1);  // every step's own: wants one more, never comes again
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() >= 3);
  CHECK(sigs[2].per_call.count() >= 3);
  CHECK(sigs[100].per_call.count() == 2);  // the first step's: timed in the first window
  CHECK(r.timer->collector().health().calls_cut == 0);
}

TEST_CASE("first-calls timing: a signature of the first steps only does not hold the first window") {
  // Steps 40 ms apart; 1 and 2 in every step, 50 in the first three only (lazy initialization): it
  // repeats (seen again 60 ms after its first sight), wants one more, and never comes again.
  Rig r({}, first_calls(4, 0, 60, 1000));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  clock::time_point last_progress{}, detached_at{};
  for (uint32_t step = 0; step < 40 && detached_at == clock::time_point{}; ++step) {
    const auto begin = clock::now();
    call(r, 1, 100);
    call(r, 2, 200);
    if (step < 3) call(r, 50, 10);
    if (step < 4) last_progress = clock::now();  // 1 and 2 have their four after step 3
    while (clock::now() - begin < std::chrono::milliseconds(40)) {
      REQUIRE(r.timer->tick(clock::now()));
      if (r.cupti->is_detached) {
        detached_at = clock::now();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  REQUIRE(detached_at != clock::time_point{});
  // Closed once the first window's minimum had passed and 50 had been away twice its gap, not
  // kPatience after the last progress.
  CHECK(detached_at - started >= CuptiSession::kPatience);
  CHECK(detached_at - last_progress < CuptiSession::kPatience - std::chrono::milliseconds(50));
  bool retired = false;
  for (const auto& e : r.timer->events()) retired |= e.what.rfind("retired 1 repeating signature", 0) == 0;
  CHECK(retired);
  CHECK(r.timer->detaches() == 1);
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() >= 4);
  CHECK(sigs[50].per_call.count() == 3);
}

TEST_CASE("first-calls timing: gaps seen in a slow first step do not keep a gone signature's window") {
  // A first step of 250 ms (lazy initialization): 50 is seen at its start and its end, never again.
  // Then steps 40 ms apart with 1 and 2, which want 8 calls. 50's own gap (250 ms) would keep it
  // until 770 ms; the loop's recent gaps (40 ms) retire it once the first step's have aged.
  Rig r({}, first_calls(8, 0, 60, 1000));
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  using clock = std::chrono::steady_clock;
  auto tick_until = [&r](clock::time_point end) {
    while (clock::now() < end) {
      REQUIRE(r.timer->tick(clock::now()));
      if (r.cupti->is_detached) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  const auto started = clock::now();
  call(r, 1, 100);
  call(r, 2, 200);
  call(r, 50, 10);
  tick_until(started + std::chrono::milliseconds(250));
  call(r, 50, 10);  // repeats: its gap 250 ms
  clock::time_point last_progress{};
  for (uint32_t step = 0; step < 40 && !r.cupti->is_detached; ++step) {
    const auto begin = clock::now();
    call(r, 1, 100);
    call(r, 2, 200);
    if (step < 7) last_progress = clock::now();  // 1 and 2 have their eight after the 7th
    tick_until(begin + std::chrono::milliseconds(40));
  }
  const auto detached_at = clock::now();
  REQUIRE(r.cupti->is_detached);
  // Without the cap: 50 retired at 770 ms, the patience at 790 ms; with it at about 600 ms.
  CHECK(detached_at - last_progress < std::chrono::milliseconds(200));
  bool retired = false;
  for (const auto& e : r.timer->events()) retired |= e.what.rfind("retired 1 repeating signature", 0) == 0;
  CHECK(retired);
  r.timer->finish();
  CHECK(r.timer->collector().by_signature()[1].per_call.count() >= 8);
}

TEST_CASE("first-calls timing: a window no wanted signature uses closes") {
  Rig r({}, first_calls(3));
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
  Rig r({}, first_calls(1));
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
  Rig r({}, first_calls(1, 1000));
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

TEST_CASE(
    "sampled timing: a call begun between windows is not followed; its launches in the next window are left out") {
  Rig r({}, Sampling::windows(10, 100), /*untracked_links=*/true);
  REQUIRE(r.timer->start(""));
  REQUIRE(r.timer->op_start(1));  // inside the first window: followed
  r.cupti->launch("inside", 100);
  r.timer->op_end();
  REQUIRE(r.timer->window(false));
  const int pushes = r.log->pushes;
  CHECK_FALSE(r.timer->op_start(2));  // between windows: no id, and no op_end owed
  r.cupti->inside_op = true;
  r.cupti->launch("between", 300);
  REQUIRE(r.timer->window(true));  // a window opens while it runs
  r.cupti->launch("after the open", 300);
  r.cupti->inside_op = false;
  CHECK(r.log->pushes == pushes);
  REQUIRE(r.timer->op_start(1));  // inside the second window: followed and timed
  r.cupti->inside_op = true;
  r.cupti->launch("inside", 150);
  r.timer->op_end();
  r.cupti->inside_op = false;
  r.cupti->launch("outside any op", 50);
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 2);
  CHECK(sigs[1].per_call.total() == 250);
  CHECK(sigs[2].per_call.count() == 0);
  const Health h = r.timer->collector().health();
  CHECK(h.untracked_launches == 1);  // "after the open": not timed, not unattributed
  CHECK(h.unattributed == 1);        // "outside any op"
  CHECK(h.calls_cut == 0);
  CHECK(h.calls_timed == 2);
  CHECK(r.log->pops == r.log->pushes);
}

TEST_CASE("first-calls timing: once detached, calls no signature wants are not followed; wanted ones are") {
  Rig r({}, first_calls(1), /*untracked_links=*/true);
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  call(r, 1, 100);
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now() + kLater));
  REQUIRE(r.cupti->is_detached);
  const int pushes = r.log->pushes;
  for (int k = 0; k < 5; ++k) CHECK_FALSE(r.timer->op_start(1));  // has its call: nothing to do
  CHECK(r.log->pushes == pushes);
  CHECK_FALSE(r.timer->op_start(1));  // an outer call, not followed, ...
  r.cupti->inside_op = true;
  call(r, 3, 40);  // ... in which a first sight attaches CUPTI and is timed
  CHECK(r.log->attaches == 1);
  r.cupti->launch("the outer call's, after", 60);  // left out, not tied to no op
  r.cupti->inside_op = false;
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[1].per_call.count() == 1);
  CHECK(sigs[3].per_call.count() == 1);
  CHECK(sigs[3].per_call.total() == 40);
  const Health h = r.timer->collector().health();
  CHECK(h.untracked_launches == 1);
  CHECK(h.unattributed == 0);
  CHECK(r.log->pops == r.log->pushes);
}

TEST_CASE("signature wants: first sight, repeats, credits, refresh, and the counts of signatures short") {
  using Want = SignatureWants::Want;
  SignatureWants w(2);
  CHECK(w.wants(7) == Want::New);
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
  CHECK(w.wants(9) == Want::New);
  CHECK_FALSE(w.credit(9));  // counted, but a signature seen once is no progress
  CHECK(w.short_of() == 1);
  CHECK_FALSE(w.credit(11));  // never seen: nothing to credit
  CHECK(w.refresh() == 1);    // only 7 had what it wanted
  CHECK(w.short_of() == 2);
  CHECK(w.short_repeating() == 1);
  CHECK(w.credit(7));
  CHECK(w.short_repeating() == 0);
  CHECK(w.wants((1u << 24) - 2) == Want::New);  // the largest ids have a place too
  CHECK(w.wants(1u << 24) == Want::No);         // past the id range: never wanted
}

TEST_CASE("signature wants: a signature seen again within the repeat gap does not repeat; past it, it does") {
  using Want = SignatureWants::Want;
  SignatureWants within(2, 10000);
  CHECK(within.wants(7) == Want::New);
  CHECK(within.wants(7) == Want::New);  // again at once: one step's burst, not known to repeat
  CHECK_FALSE(within.credit(7));        // counted, but no progress
  CHECK(within.repeating() == 0);
  CHECK(within.short_repeating() == 0);
  CHECK(within.short_of() == 1);
  CHECK(within.credit(7) == false);
  CHECK(within.wants(7) == Want::No);  // had its two
  CHECK(within.short_of() == 0);

  SignatureWants past(2, 20);
  CHECK(past.wants(7) == Want::New);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(past.wants(7) == Want::Again);
  CHECK(past.repeating() == 1);
  CHECK(past.short_repeating() == 1);
  CHECK(past.credit(7));
}

namespace {
bool odd_is_variant(uint32_t sig) { return sig % 2 == 1; }
}  // namespace

TEST_CASE("signature wants: a float variant wants nothing until it repeats, then its own calls") {
  using Want = SignatureWants::Want;
  SignatureWants w(2, 20, &odd_is_variant);
  CHECK(w.wants(4) == Want::New);  // not a variant
  CHECK(w.wants(5) == Want::No);   // a variant's first sight
  CHECK(w.wants(5) == Want::No);   // again within the gap: the same step's burst
  CHECK(w.seen() == 2);
  CHECK(w.variants() == 1);
  CHECK(w.short_of() == 1);
  CHECK_FALSE(w.credit(5));  // wanted nothing: nothing to count
  CHECK(w.refresh() == 0);   // 4 still wants its calls; 5 was never timed and is not asked for one
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(w.wants(5) == Want::Again);  // it repeats: it is timed like any other
  CHECK(w.variants() == 0);
  CHECK(w.short_of() == 2);
  CHECK(w.short_repeating() == 1);
  CHECK(w.credit(5));
  CHECK(w.credit(5));
  CHECK(w.wants(5) == Want::No);
  CHECK(w.short_repeating() == 0);
  CHECK(w.refresh() == 1);  // now 5 had what it wanted and follows drift; 4 still wants its own
  SignatureWants none(0, 0, &odd_is_variant);
  CHECK(none.wants(7) == Want::No);
  CHECK(none.variants() == 0);  // nothing is wanted at all: no variant to tell apart
}

TEST_CASE("first-calls timing: a float variant's first sight opens no window; one that repeats does") {
  Sampling s = first_calls(2, 0, 20);
  s.is_variant = &odd_is_variant;
  Rig r({}, s);
  r.cupti->detachable = true;
  REQUIRE(r.timer->start(""));
  call(r, 2, 100);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  call(r, 2, 100);  // repeats, has its two
  REQUIRE(r.timer->tick(std::chrono::steady_clock::now() + kLater));
  REQUIRE(r.cupti->is_detached);
  call(r, 3, 50);  // AdamW's step size of the next step: not worth a window
  CHECK(r.log->attaches == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  call(r, 3, 50);  // it came back: it repeats, and attaches for itself
  CHECK(r.log->attaches == 1);
  call(r, 3, 50);
  r.timer->finish();
  auto sigs = r.timer->collector().by_signature();
  CHECK(sigs[2].per_call.count() == 2);
  CHECK(sigs[3].per_call.count() == 2);
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
