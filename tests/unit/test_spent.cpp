// Where a replay worker's time goes: each second is charged once, to the innermost open phase, and a
// sealed phase keeps what runs inside it.
#include <chrono>
#include <limits>
#include <map>
#include <thread>

#include "catch.h"
#include "replay/case/spent.h"

using bb::replay::Spent;

namespace {

void busy(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::map<std::string, double> taken() {
  std::map<std::string, double> out;
  for (const auto& [phase, s] : Spent::take()) out[phase] += s;
  return out;
}

}  // namespace

TEST_CASE("nested phases are charged to the innermost, not twice") {
  Spent::take();
  const auto t0 = std::chrono::steady_clock::now();
  {
    Spent outer("compare");
    busy(20);
    {
      Spent inner("native runs");
      busy(40);
    }
  }
  const double total = seconds_since(t0);
  const auto t = taken();
  REQUIRE(t.size() == 2);
  CHECK(t.at("native runs") >= 0.04);
  CHECK(t.at("compare") >= 0.02);
  CHECK(t.at("compare") <= total - t.at("native runs"));                       // the inner time is not the outer's too
  CHECK(t.at("compare") + t.at("native runs") == Approx(total).margin(0.01));  // (40 ms if counted twice)
  CHECK(taken().empty());                                                      // take() clears
}

TEST_CASE("a sealed phase keeps the time of phases opened inside it") {
  Spent::take();
  {
    Spent reference("float64 reference", true);
    busy(10);
    {
      Spent inner("native runs");
      busy(30);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  {
    Spent after("native runs");  // the seal ends with its scope
    busy(10);
  }
  const double after = seconds_since(t1);
  const auto t = taken();
  REQUIRE(t.size() == 2);
  CHECK(t.at("float64 reference") >= 0.04);  // its own 10 ms and the 30 ms inside it
  CHECK(t.at("native runs") >= 0.01);
  CHECK(t.at("native runs") <= after);  // only the scope after the seal
}

TEST_CASE("a scope of no phase charges nothing, and phases inside it are charged as ever") {
  Spent::take();
  {
    Spent unnamed(bb::replay::phase::kUnnamed);
    busy(20);
    {
      Spent inner("native runs");
      busy(20);
    }
  }
  const auto t = taken();
  REQUIRE(t.size() == 1);  // (no "(no phase)" entry: its 20 ms stay the report's "other in the worker")
  CHECK(t.at("native runs") >= 0.02);
  CHECK(t.at("native runs") < 0.035);  // not the unnamed scope's time too
}

TEST_CASE("another process's phases are moved out of the wait, within what was waited, known names only") {
  Spent::take();
  const auto t0 = std::chrono::steady_clock::now();
  {
    Spent wait("kernel runs");
    busy(30);  // (the wait for the other process's answer)
    // It says: 10 ms of poisoning ("integrity"), a made-up phase, a negative and a NaN figure.
    Spent::charge_remote({{"integrity", 0.010}, {"made up", 5.0}, {"timed runs", -1.0},
                          {"comparison", std::numeric_limits<double>::quiet_NaN()}},
                         seconds_since(t0));
  }
  const double total = seconds_since(t0);
  const auto t = taken();
  REQUIRE(t.size() == 2);  // (nothing charged to "made up", "timed runs" or "comparison")
  CHECK(t.at("integrity") == Approx(0.010));
  CHECK(t.at("kernel runs") + t.at("integrity") == Approx(total).margin(0.005));  // each second once

  // A process claiming more than was waited gets no more than the wait, and the wait's phase nothing.
  {
    Spent wait("transfer");
    busy(10);
    Spent::charge_remote({{"inputs", 100.0}, {"comparison", 100.0}}, 0.010);
  }
  const auto u = taken();
  CHECK(u.at("inputs") == Approx(0.010));
  CHECK(u.count("comparison") == 0);  // (nothing left of the wait for it)
  CHECK(u.at("transfer") >= 0.0);
  CHECK(u.at("transfer") < 0.005);
}

TEST_CASE("time measured inside a scope by a callee is moved to its phase, once") {
  Spent::take();
  const auto t0 = std::chrono::steady_clock::now();
  {
    Spent evicting("eviction and sync");
    busy(20);
    Spent::charge_within("CUPTI records", 0.008);  // (of those 20 ms, the callee says 8 were its flushes)
  }
  const double total = seconds_since(t0);
  const auto t = taken();
  CHECK(t.at("CUPTI records") == Approx(0.008));
  CHECK(t.at("eviction and sync") + t.at("CUPTI records") == Approx(total).margin(0.005));
  Spent::charge_within("CUPTI records", -1.0);  // (nothing, and no scope to take it from)
  CHECK(taken().empty());
}
