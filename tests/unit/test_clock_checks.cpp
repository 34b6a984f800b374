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

TEST_CASE("each run is set against the dry run made beside it") {
  // the machine grew slower halfway (a neighbour started): real and dry runs slowed alike
  std::vector<OutsideRun> r = runs(200, 200), d = dry();
  for (size_t i = 4; i < r.size(); ++i) r[i].thread_cpu_us += 60, r[i].wall_us += 300, d[i].thread_cpu_us += 60,
                                        d[i].wall_us += 300;
  CHECK(clock_disagreement(r, d).empty());
}

TEST_CASE("a thread whose CPU time is unknown is judged by the wall clock alone") {
  std::vector<OutsideRun> r(7, OutsideRun{300, 380, -1});
  CHECK(clock_disagreement(r, dry()).empty());
  std::vector<OutsideRun> stolen(7, OutsideRun{300, 1380, -1});  // (1000 us more than the dry runs' 80)
  CHECK_FALSE(clock_disagreement(stolen, dry()).empty());
}
