// Replay reports: derived figures (per op, overall, perf@p) and a golden file per writer.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "replay/report/case_json.h"
#include "replay/report/report_writers.h"

using namespace bb::replay;

namespace {

CaseResult passed(std::string op, std::string sig, uint64_t calls, double native_us, double generated_us) {
  CaseResult c;
  c.op = std::move(op);
  c.signature = std::move(sig);
  c.variant = "traced";
  c.calls = calls;
  c.status = Status::Passed;
  c.rtol = 1.3e-6;
  c.atol = 1e-5;
  c.max_abs_error = 2.5e-7;
  c.max_rel_error = 1e-7;
  c.native = Timing{native_us, native_us * 0.9, native_us * 1.1, native_us * 0.8, 25};
  c.generated = Timing{generated_us, generated_us * 0.95, generated_us * 1.05, generated_us * 0.9, 25};
  return c;
}

// A case that ran no comparison: crashed, skipped.
CaseResult not_run(std::string op, std::string sig, std::string variant, Status status, std::string why) {
  CaseResult c;
  c.op = std::move(op);
  c.signature = std::move(sig);
  c.variant = std::move(variant);
  c.status = status;
  c.message = std::move(why);
  return c;
}

Report sample_report() {
  Report r;
  r.meta.tool = "bbreplay 0.1.0";
  r.meta.trace = "bbtrace.yaml";
  r.meta.backend = "backends/cpu_reference";
  r.meta.device = "cpu";
  r.meta.torch = "2.11.0+cu130";
  r.meta.date = "2026-11-30T12:00:00Z";
  r.meta.timing = "host clock, 25 repetitions, 64 MiB cache flush between repetitions";
  r.meta.seed = 7;
  // a signature of the trace no case covers (its op not selected), with the traced device time of
  // every signature: what coverage weighs
  r.meta.not_replayed = {{"aten::mm", "not selected by --ops", 5, 400.0}};
  r.cases.push_back(passed("aten::relu", "float32[8,32]", 12, 10.0, 5.0));
  r.cases.back().wall_s = 1.5;  // where the time went: phases, the worker's remainder, its start
  r.cases.back().worker_s = 1.0;
  r.cases.back().spent = {{"inputs", 0.25}, {"timed runs", 0.5}};
  r.cases.back().traced_device_us = 120.0;
  r.cases.push_back(passed("aten::relu", "float32[4]", 3, 2.0, 4.0));
  r.cases.back().traced_device_us = 6.0;
  CaseResult bad = passed("aten::add.Tensor", "float32[8,32], float32[32], alpha=1", 4, 3.0, 1.0);
  bad.status = Status::Failed;
  bad.message = "output 0: float32[8,32]: 256 of 256 elements differ; first at flat index 0 (expected 1, got 42)";
  bad.max_abs_error = 41;
  bad.max_rel_error = 41;
  bad.traced_device_us = 12.0;
  r.cases.push_back(bad);
  CaseResult flagged = passed("aten::gelu", "float32[8,64], approximate=\"none\"", 2, 8.0, 0.5);
  flagged.status = Status::Failed;
  flagged.flags = {bb::verify::Flag::CachedResult};
  flagged.message = "outputs did not change when the inputs did";
  r.cases.push_back(flagged);
  r.cases.push_back(not_run("aten::gelu", "float32[0]", "empty", Status::Crashed, "worker died of SIGSEGV"));
  r.cases.push_back(not_run("aten::embedding", "float32[1000,64], int64[8,32]", "traced", Status::Skipped,
                            "the backend has no kernel for this op"));
  r.cases.back().calls = 2;
  r.cases.back().traced_device_us = 62.0;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("per-op and overall figures") {
  Report r = sample_report();
  auto ops = r.ops();
  REQUIRE(ops.size() == 4);
  CHECK(ops[0].op == "aten::relu");
  CHECK(ops[0].passed == 2);
  CHECK(*ops[0].speedup == Approx(std::sqrt(2.0 * 0.5)));  // geometric mean of 2x and 0.5x
  CHECK(ops[0].native_us == Approx(10.0 * 12 + 2.0 * 3));  // weighted by calls
  CHECK_FALSE(ops[1].speedup);                             // failed cases never enter the speedup
  CHECK(ops[2].flagged == 1);
  CHECK(ops[2].crashed == 1);
  CHECK(ops[2].flags == std::vector<bb::verify::Flag>{bb::verify::Flag::CachedResult});
  CHECK(ops[3].skipped == 1);
  Overall o = r.overall();
  CHECK(o.cases == 6);
  CHECK(o.passed == 2);
  CHECK(o.failed == 2);
  CHECK(o.crashed == 1);
  CHECK(*o.speedup == Approx(1.0));
  REQUIRE(o.perf_at.size() == 4);
  CHECK(o.perf_at[0].second == Approx(1.0 / 3));  // relu correct; add, gelu not; embedding not evaluated
  CHECK(o.perf_at[1].second == Approx(0.0));      // relu's speedup is 1.0, not above 1
  CHECK_FALSE(r.all_passed());
}

TEST_CASE("the JSON report's cases read back as the cases written: one schema, the worker protocol's too") {
  const Report r = sample_report();
  const auto j = nlohmann::ordered_json::parse(make_writer("json")->render(r));
  REQUIRE(j["cases"].size() == r.cases.size());
  const auto flagged = r.flagged_ops();
  for (size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult back = case_from_json(j["cases"][i]);
    CHECK(case_to_json(back, Report::speedup_of(back, flagged)) == j["cases"][i]);
    CHECK(back.worker_s == r.cases[i].worker_s);
    CHECK(back.spent == r.cases[i].spent);
  }
}

TEST_CASE("coverage: the share of the traced program's calls and device time that cases judged") {
  const Coverage c = sample_report().coverage();
  // traced cases: relu 12 + 3, add 4, gelu 2 (judged: passed or failed), embedding 2 (skipped); mm 5 not
  // replayed. The empty-variant crash is not a traced call.
  CHECK(c.calls == 12 + 3 + 4 + 2 + 2 + 5);
  CHECK(c.judged_calls == 12 + 3 + 4 + 2);
  CHECK(c.device_us == Approx(120 + 6 + 12 + 0 + 62 + 400));
  CHECK(c.judged_device_us == Approx(120 + 6 + 12));
  REQUIRE(c.not_judged.size() == 2);
  CHECK(c.not_judged[0].op == "aten::mm");  // largest device time first
  CHECK(c.not_judged[0].reason == "not selected by --ops");
  CHECK(c.not_judged[1].op == "aten::embedding");
  CHECK(c.not_judged[1].reason == "the backend has no kernel for this op");
  CHECK(c.not_judged[1].calls == 2);
}

TEST_CASE("each writer's output matches its golden file") {
  Report r = sample_report();
  const bool update = std::getenv("BB_UPDATE_GOLDEN") != nullptr;
  std::string rewritten;
  for (const char* fmt : {"console", "json", "csv", "markdown"}) {
    auto w = make_writer(fmt);
    REQUIRE(w);
    const std::string ext = std::string(fmt) == "console" ? "txt" : std::string(fmt) == "markdown" ? "md" : fmt;
    const std::string path = std::string(BB_GOLDEN_DIR) + "/report." + ext;
    const std::string text = w->render(r);
    INFO(fmt);
    if (update) {
      const bool changed = text != read_file(path);
      std::ofstream out(path);
      out << text;
      out.close();
      REQUIRE(out.good());
      rewritten += "\n  " + path + (changed ? " (changed)" : " (unchanged)");
      continue;
    }
    CHECK(text == read_file(path));
  }
  CHECK_FALSE(make_writer("xml"));
  // Update mode never passes: comparing with the files just written would prove nothing.
  if (update)
    FAIL("BB_UPDATE_GOLDEN is set: rewrote" << rewritten
                                            << "\nreview them (git diff) and commit them, then run without "
                                               "BB_UPDATE_GOLDEN");
}

TEST_CASE("a random op's case says what was judged, in every writer") {
  Report r = sample_report();
  CaseResult c = passed("aten::bernoulli_.float", "float32[16], 0.3", 2, 1.0, 1.0);
  c.statistics = "judged by its properties: ...; statistically on 262144 elements";
  r.cases.push_back(c);
  for (const char* format : {"console", "markdown"}) {
    const std::string out = make_writer(format)->render(r);
    CHECK(out.find("andom ops judged by their properties") != std::string::npos);  // (R in Markdown)
    CHECK(out.find("statistically on 262144 elements") != std::string::npos);
  }
  const auto j = nlohmann::json::parse(make_writer("json")->render(r));
  CHECK(j["cases"].back()["statistics"] == c.statistics);
  CHECK(j["cases"].front()["statistics"].is_null());
  CHECK(make_writer("console")->render(sample_report()).find("random ops judged") == std::string::npos);
}
