// Host-timed runs checked against clocks outside the kernel's process (policy/verify/clock_checks.h).
#include "catch.h"
#include "policy/verify/clock_checks.h"

using bb::verify::clock_disagreement;
using bb::verify::OutsideRun;

namespace {

// `n` runs of a call that took `true_us` (its thread on a CPU all along; answering costs 30 us of the
// thread's CPU and 80 us of the wall, as on a virtual machine), whose process reported `reported_us`; and
// the dry runs made between them.
std::vector<OutsideRun> runs(double true_us, double reported_us, size_t n = 7) {
  return std::vector<OutsideRun>(n, OutsideRun{reported_us, true_us + 80, true_us + 30});
}
std::vector<OutsideRun> dry(size_t n = 7) { return std::vector<OutsideRun>(n, OutsideRun{0.2, 80.2, 30.2}); }

}  // namespace

TEST_CASE("honest runs agree with both outside clocks, short or long") {
  for (double us : {1.0, 20.0, 500.0, 20000.0}) CHECK(clock_disagreement(runs(us, us), dry()).empty());
  // a kernel whose work is on other threads (its calling thread waits): its thread's CPU time is short
  std::vector<OutsideRun> waiting(7, OutsideRun{800, 880, 35});
  CHECK(clock_disagreement(waiting, dry()).empty());
}

TEST_CASE("a clock wound back shows against the calling thread's CPU time") {
  // worked 1000 us on its thread, reported 300 (the GOT-patched clock of the red team's run)
  CHECK(clock_disagreement(runs(1000, 300), dry()).find("on a CPU") != std::string::npos);
  // a theft within the allowance (50 us and 10 %) is not called one; 150 us is
  CHECK(clock_disagreement(runs(1000, 960), dry()).empty());
  CHECK_FALSE(clock_disagreement(runs(1000, 850), dry()).empty());
  // a short kernel that reports nothing of its 120 us
  CHECK_FALSE(clock_disagreement(runs(120, 1), dry()).empty());
}

TEST_CASE("on a busy machine the waits inside the call count on both sides, so a theft still shows") {
  // 200 us of work on its thread, which waited 300 us for a CPU inside the timed call: the honest report
  // is 500 us, and the thread's time (on a CPU or waiting for one) 530
  std::vector<OutsideRun> honest(7, OutsideRun{500, 580, 530});
  CHECK(clock_disagreement(honest, dry()).empty());
  // 120 us taken off that run: by the thread's CPU time alone (230 us) it would read as honest
  std::vector<OutsideRun> wound(7, OutsideRun{380, 580, 530});
  CHECK(clock_disagreement(wound, dry()).find("on a CPU or waiting for one") != std::string::npos);
}

TEST_CASE("a clock wound back while the work ran elsewhere shows against the outside wall clock") {
  // the calling thread waited (little CPU), the work took 2000 us of wall time, 400 were reported
  std::vector<OutsideRun> r(7, OutsideRun{400, 2080, 35});
  CHECK(clock_disagreement(r, dry()).find("outside the kernel's process saw") != std::string::npos);
}

TEST_CASE("the lower quartile decides: noise on a few runs is not a theft, and too few runs decide nothing") {
  std::vector<OutsideRun> r = runs(100, 100);
  r[0] = {100, 5000, 900};  // runs the busy machine interrupted
  r[1] = {100, 5000, 900};
  r[2] = {100, 5000, 900};
  CHECK(clock_disagreement(r, dry()).empty());
  CHECK(clock_disagreement(runs(1000, 100, 2), dry(2)).empty());
  CHECK_FALSE(clock_disagreement(runs(1000, 100, 3), dry(3)).empty());
}

TEST_CASE("runs of nothing that a busy machine slowed do not hide a theft") {
  // 120 us taken off every run of 200; 4 of 12 runs of nothing waited 150-400 us for a CPU. Each run less
  // the run of nothing beside it would put a third of the differences below the allowance.
  std::vector<OutsideRun> r(12, OutsideRun{80, 280, 230}), d = dry(12);
  for (size_t i : {1u, 4u, 7u, 10u}) d[i].thread_us += 150 + 80.0 * (i % 4), d[i].wall_us += 150 + 80.0 * (i % 4);
  CHECK(clock_disagreement(r, d).find("on a CPU or waiting for one") != std::string::npos);
  // and honest runs beside the same runs of nothing are not accused
  CHECK(clock_disagreement(std::vector<OutsideRun>(12, OutsideRun{200, 280, 230}), d).empty());
}

TEST_CASE("runs and runs of nothing that a busy machine slowed alike") {
  // the machine grew slower halfway (a neighbour started): real and dry runs slowed alike
  std::vector<OutsideRun> r = runs(200, 200), d = dry();
  for (size_t i = 4; i < r.size(); ++i) r[i].thread_us += 60, r[i].wall_us += 300, d[i].thread_us += 60,
                                        d[i].wall_us += 300;
  CHECK(clock_disagreement(r, d).empty());
}

TEST_CASE("a thread whose CPU time is unknown is judged by the wall clock alone") {
  std::vector<OutsideRun> r(7, OutsideRun{300, 380, -1});
  CHECK(clock_disagreement(r, dry()).empty());
  std::vector<OutsideRun> stolen(7, OutsideRun{300, 1380, -1});  // (1000 us more than the dry runs' 80)
  CHECK_FALSE(clock_disagreement(stolen, dry()).empty());
}
