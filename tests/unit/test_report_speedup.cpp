// Which cases and ops get a speedup: none for an op with any flagged case, none for a case whose times
// are unstable; every writer agrees.
#include <nlohmann/json.hpp>

#include "catch.h"
#include "replay/report/report_writers.h"

using namespace bb::replay;

namespace {

CaseResult timed(std::string op, std::string variant, double native_us, double generated_us) {
  CaseResult c;
  c.op = std::move(op);
  c.signature = "float32[64,1024]";
  c.variant = std::move(variant);
  c.calls = 1;
  c.status = Status::Passed;
  c.native = Timing{native_us, native_us * 0.9, native_us * 1.1, native_us * 0.8, 25};
  c.generated = Timing{generated_us, generated_us * 0.95, generated_us * 1.05, generated_us * 0.9, 25};
  return c;
}

// relu: one honest-looking timed case (10x) and one flagged case; add: one stable, one unstable case.
Report mixed() {
  Report r;
  r.cases.push_back(timed("aten::relu", "traced", 100, 10));
  CaseResult cheat = timed("aten::relu", "noncontiguous", 0, 0);
  cheat.native.reset();
  cheat.generated.reset();
  cheat.status = Status::Failed;
  cheat.flags = {bb::verify::Flag::NativeCall};
  r.cases.push_back(cheat);
  r.cases.push_back(timed("aten::add.Tensor", "traced", 20, 10));
  CaseResult noisy = timed("aten::add.Tensor", "traced", 17, 1);
  noisy.generated = Timing{1, 0.5, 7987, 0.4, 11};
  noisy.unstable = "the kernel's interquartile range (0.5 to 7987 us) is wider than its median (1 us)";
  r.cases.push_back(noisy);
  return r;
}

}  // namespace

TEST_CASE("an op with a flagged case has no speedup anywhere") {
  const Report r = mixed();
  const auto ops = r.ops();
  REQUIRE(ops[0].op == "aten::relu");
  CHECK(ops[0].flagged == 1);
  CHECK_FALSE(ops[0].speedup);
  CHECK(ops[0].native_us == 0);
  CHECK_FALSE(Report::speedup_of(r.cases[0], r.flagged_ops()));
  CHECK(r.cases[0].speedup());  // (the case alone would have had one)

  const auto j = nlohmann::json::parse(make_writer("json")->render(r));
  CHECK(j["ops"][0]["speedup_geomean"].is_null());
  CHECK(j["ops"][0]["speedup_withheld"].get<std::string>().rfind("flagged", 0) == 0);
  CHECK(j["cases"][0]["speedup"].is_null());
  const std::string csv = make_writer("csv")->render(r);
  CHECK(csv.find("10.0000") == std::string::npos);  // relu's 100/10 nowhere
  const std::string console = make_writer("console")->render(r);
  CHECK(console.find("flagged") != std::string::npos);
  CHECK(console.find("10.00x") == std::string::npos);
  CHECK(make_writer("markdown")->render(r).find("| flagged |") != std::string::npos);
  CHECK(r.overall().perf_at[0].second == Approx(0.5));  // relu is not correct; add is
}

TEST_CASE("an unstable case enters no speedup, and the JSON says why") {
  const Report r = mixed();
  const auto ops = r.ops();
  REQUIRE(ops[1].op == "aten::add.Tensor");
  CHECK(ops[1].unstable == 1);
  REQUIRE(ops[1].speedup);
  CHECK(*ops[1].speedup == Approx(2.0));  // the stable case alone, not 17x
  const auto j = nlohmann::json::parse(make_writer("json")->render(r));
  CHECK(j["cases"][3]["speedup"].is_null());
  CHECK(j["cases"][3]["unstable"].get<std::string>().find("interquartile") != std::string::npos);
  CHECK(j["cases"][2]["unstable"].is_null());
  CHECK(make_writer("console")->render(r).find("times unstable, no speedup") != std::string::npos);
}
