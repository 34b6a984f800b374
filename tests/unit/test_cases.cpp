// Case selection (replay/case/cases): --ops patterns and the cases they make; a case result's JSON line
// (replay/report/case_json), the worker's reply to its parent, read back as it was written.
#include <cmath>

#include "catch.h"
#include "replay/report/case_json.h"
#include "replay/case/cases.h"

using namespace bb::replay;

TEST_CASE("--ops patterns: full names, aten:: implied, wildcards, nothing else") {
  OpFilter relu("relu");
  CHECK(relu.matches("aten::relu"));
  CHECK_FALSE(relu.matches("aten::relu_"));
  CHECK_FALSE(relu.matches("aten::leaky_relu"));
  OpFilter adds(" add.* , *_backward");
  CHECK(adds.matches("aten::add.Tensor"));
  CHECK_FALSE(adds.matches("aten::add"));
  CHECK(adds.matches("aten::gelu_backward"));
  CHECK(OpFilter().matches("aten::anything"));
  CHECK(OpFilter("relu,mm").unused({"aten::relu", "aten::add.Tensor"}) == std::vector<std::string>{"aten::mm"});
}

TEST_CASE("every selected entry in every variant that applies; the traced one always") {
  bb::trace::Trace t;
  for (const char* op : {"aten::relu", "aten::mm", "aten::relu_"}) {
    bb::trace::TraceEntry e;
    e.op = op;
    t.ops.push_back(e);
  }
  auto cases = enumerate_cases(
      t, OpFilter("relu,relu_"), {"traced", "empty", "scalar"},
      [](const bb::trace::TraceEntry& e, const std::string& v) { return e.op == "aten::relu" && v == "empty"; });
  REQUIRE(cases.size() == 3);
  CHECK((cases[0].entry == 0 && cases[0].variant == "traced"));
  CHECK((cases[1].entry == 0 && cases[1].variant == "empty"));
  CHECK((cases[2].entry == 2 && cases[2].variant == "traced"));            // no variant applies: still reported
  CHECK(enumerate_cases(t, OpFilter(), {"traced", "empty"}).size() == 6);  // no check: every variant
}

TEST_CASE("a case result survives its JSON line") {
  CaseResult r;
  r.op = "aten::relu";
  r.signature = "float32[8, 8]";
  r.variant = "noncontiguous";
  r.calls = 12;
  r.status = Status::Failed;
  r.message = "result 0: \"quoted\"\nand a second line";
  r.flags = {bb::verify::Flag::CachedResult, bb::verify::Flag::Aliasing};
  r.max_abs_error = 0.5;
  r.max_rel_error = std::nan("");  // (written null)
  r.rtol = 1.3e-6;
  r.atol = 1e-5;
  r.native = Timing{10, 9, 11, 8, 25};
  r.native->events_median = 12;
  r.unstable = "native's interquartile range is wider than its median";
  r.generated = Timing{5, 4, 6, 3, 25};
  r.wall_s = 0.1 + 0.2;  // (not exact in decimal: must round-trip anyway)
  r.worker_s = 1.5;      // more than wall_s and the phases: read back exactly all the same
  r.spent = {{"native runs", 0.5}, {"inputs", 0.25}};  // (in the order charged, not by name)
  r.traced_device_us = 120;
  r.statistics = "mean within 3 sigma";
  r.aten_allowed = {"aten::mm"};
  const std::string line = case_to_json_line(r);
  CHECK(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);  // one line
  const CaseResult back = case_from_json_line(line);
  CHECK(back.op == r.op);
  CHECK(back.signature == r.signature);
  CHECK(back.variant == r.variant);
  CHECK(back.calls == r.calls);
  CHECK(back.status == r.status);
  CHECK(back.message == r.message);
  CHECK(back.flags == r.flags);
  CHECK(back.max_abs_error == r.max_abs_error);
  CHECK(std::isnan(back.max_rel_error));
  CHECK(back.rtol == r.rtol);
  CHECK(back.atol == r.atol);
  REQUIRE(back.native.has_value());
  CHECK(back.native->median == 10);
  CHECK(back.native->q1 == 9);
  CHECK(back.native->samples == 25);
  CHECK(back.native->events_median == 12);
  REQUIRE(back.generated.has_value());
  CHECK(back.generated->min == 3);
  CHECK(back.generated->events_median == 0);
  CHECK(back.unstable == r.unstable);
  CHECK(back.wall_s == r.wall_s);
  CHECK(back.worker_s == r.worker_s);
  CHECK(back.spent == r.spent);
  CHECK(back.traced_device_us == r.traced_device_us);
  CHECK(back.statistics == r.statistics);
  CHECK(back.aten_allowed == r.aten_allowed);
  // The line is the JSON report's case (its keys), with the case's own speedup (none: it failed).
  const auto j = nlohmann::ordered_json::parse(line);
  CHECK(j["max_abs_error"] == 0.5);
  CHECK(j["speedup"].is_null());
  CHECK(j["spent"]["other in the worker"] == 0.75);
}

TEST_CASE("a malformed result line or an unknown flag is an error, not a result") {
  CHECK_THROWS_AS(case_from_json_line("{\"op\": 1"), std::invalid_argument);
  CaseResult r;
  r.flags = {bb::verify::Flag::NativeCall};
  std::string line = case_to_json_line(r);
  line.replace(line.find("native-call"), 11, "native-cal");
  CHECK_THROWS_AS(case_from_json_line(line), std::invalid_argument);
}
