// bbreplay merge: parts written by --shard merge into the report one run would have made, and parts
// that do not belong together are refused by name.
#include <nlohmann/json.hpp>

#include "catch.h"
#include "replay/parts/part.h"
#include "replay/report/report_writers.h"

using namespace bb::replay;

namespace {

CaseResult result(const std::string& op, const std::string& variant, Status st, double us) {
  CaseResult c;
  c.op = op;
  c.signature = "float32[" + std::to_string(static_cast<int>(us)) + "]";
  c.variant = variant;
  c.calls = 3;
  c.status = st;
  c.message = st == Status::Passed ? "" : "values differ: max abs error 0.1";
  c.max_abs_error = st == Status::Passed ? 0 : 0.1 / 3;  // not exact in decimal: must round-trip anyway
  c.rtol = 1.3e-6;
  c.atol = 1e-5;
  if (variant == "traced" && st == Status::Passed) {
    c.native = Timing{us, us * 0.9, us * 1.1, us * 0.8, 25, 0};
    c.generated = Timing{us / 1.7, us / 1.8, us / 1.6, us / 1.9, 25, 0};
  }
  c.wall_s = us / 1000;
  c.worker_s = us / 1100;
  c.spent = {{"inputs", us / 7000}, {"timed runs", us / 3000}};
  c.traced_device_us = us * 3;
  return c;
}

Report whole_run() {
  Report r;
  r.meta.tool = "bbreplay 0.1.0";
  r.meta.trace = "t.yaml";
  r.meta.backend = "b";
  r.meta.device = "cpu";
  r.meta.torch = "2.11.0";
  r.meta.date = "2026-12-01T10:00:00Z";
  r.meta.timing = "host clock";
  r.meta.seed = 3;
  r.meta.not_replayed = {{"aten::mm", "not selected by --ops", 40, 12.5}};
  const Status st[] = {Status::Passed, Status::Failed, Status::Skipped, Status::Passed, Status::Crashed};
  for (int i = 0; i < 23; ++i)
    r.cases.push_back(
        result(i % 3 ? "aten::relu" : "aten::add.Tensor", i % 4 ? "traced" : "noncontiguous", st[i % 5], 10.0 + i));
  r.cases[7].flags = {bb::verify::Flag::Aliasing};
  return r;
}

const RunIdentity kRun = {{"tool", "bbreplay 0.1.0"}, {"trace", "content hash 1"}, {"seed", "3"}};

// The part K of N of `whole` as bbreplay --shard writes it (its cases by cost, here by position).
std::string part_text(const Report& whole, size_t k, size_t n, const RunIdentity& run = kRun) {
  std::vector<uint64_t> costs;
  for (const auto& c : whole.cases) costs.push_back(static_cast<uint64_t>(c.wall_s * 1000));
  PartInfo info;
  info.shard = {k, n};
  info.identity = run;
  info.cases_total = whole.cases.size();
  info.cases_hash = "cases-1";
  info.assigned = shard_cases(costs, info.shard);
  Report part;
  part.meta = whole.meta;
  for (size_t pos : info.assigned) part.cases.push_back(whole.cases[pos]);
  info.positions = info.assigned;
  return render_part(part, info);
}

std::vector<Part> parts_of(const Report& whole, size_t n) {
  std::vector<Part> parts;
  for (size_t k = n; k-- > 0;)  // in any order
    parts.push_back(parse_part(part_text(whole, k, n), "part" + std::to_string(k) + ".json"));
  return parts;
}

nlohmann::json without_meta(const Report& r) {
  auto j = nlohmann::json::parse(make_writer("json")->render(r));
  j.erase("meta");
  return j;
}

std::string merge_error(const std::vector<Part>& parts) {
  try {
    merge_parts(parts);
  } catch (const MergeError& e) {
    return e.what();
  }
  return "";
}

bool says(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("merged parts are the report of one run: cases, statuses, figures, coverage") {
  const Report whole = whole_run();
  for (size_t n : {1, 2, 3, 5, 30}) {
    const Report merged = merge_parts(parts_of(whole, n));
    CHECK(without_meta(merged) == without_meta(whole));
    CHECK(make_writer("csv")->render(merged) == make_writer("csv")->render(whole));
    CHECK(merged.all_passed() == whole.all_passed());
    CHECK(says(merged.meta.timing, "run in " + std::to_string(n) + " parts"));
  }
}

TEST_CASE("a part is a report of its own cases, and says which part it is") {
  const auto j = nlohmann::json::parse(part_text(whole_run(), 1, 3));
  CHECK(j["schema"] == "bbreplay-report");
  CHECK(j["part"]["k"] == 1);
  CHECK(j["part"]["n"] == 3);
  CHECK(j["part"]["cases_total"] == 23);
  CHECK(j["cases"].size() == j["part"]["assigned"].size());
  CHECK(j["cases"].size() < 23);
}

TEST_CASE("merge names a missing or duplicated part") {
  const Report whole = whole_run();
  auto parts = parts_of(whole, 3);  // part2, part1, part0
  auto missing = parts;
  missing.erase(missing.begin() + 1);
  CHECK(says(merge_error(missing), "missing part 1/3"));
  missing.erase(missing.begin());
  CHECK(says(merge_error(missing), "missing parts 1/3, 2/3"));
  auto twice = parts;
  twice.push_back(parse_part(part_text(whole, 1, 3), "again.json"));
  CHECK(says(merge_error(twice), "part 1/3 (again.json) is given twice: part1.json and again.json"));
}

TEST_CASE("merge refuses parts of different runs, naming the files and what differs") {
  const Report whole = whole_run();
  auto parts = parts_of(whole, 2);
  RunIdentity other = kRun;
  other[1].second = "content hash 2";
  parts[1] = parse_part(part_text(whole, 0, 2, other), "other.json");  // (parts[0] is part 1/2)
  const std::string e = merge_error(parts);
  CHECK(says(e, "other.json is not a part of the same run as part1.json"));
  CHECK(says(e, "their trace differs (content hash 1 in part1.json; content hash 2 in other.json)"));
  other = kRun;
  other[2].second = "4";
  parts[1] = parse_part(part_text(whole, 0, 2, other), "seed.json");
  CHECK(says(merge_error(parts), "their seed differs"));
  // a part of a run split in 3 with parts of a run split in 2
  parts[1] = parse_part(part_text(whole, 0, 3), "three.json");
  CHECK(says(merge_error(parts), "split into a different number of parts"));
}

TEST_CASE("bad part files are errors that name the file") {
  const std::string good = part_text(whole_run(), 0, 2);
  auto error = [](const std::string& text) {
    try {
      parse_part(text, "p.json");
    } catch (const MergeError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(says(error(good.substr(0, good.size() / 2)), "p.json: not JSON (a truncated or malformed part?)"));
  CHECK(says(error("version: 1\nops: []\n"), "p.json: not JSON"));
  CHECK(says(error("{\"schema\": \"other\"}"), "p.json: not a bbreplay report"));
  CHECK(says(error(make_writer("json")->render(whole_run())), "p.json: the report of a whole run, not a part"));
  auto j = nlohmann::json::parse(good);
  j["part"].erase("assigned");
  CHECK(says(error(j.dump()), "p.json: malformed part"));
  j = nlohmann::json::parse(good);
  j["part"]["results"][0]["status"] = "great";
  CHECK(says(error(j.dump()), "p.json: malformed part"));
  j = nlohmann::json::parse(good);
  j["schema_version"] = 1;
  CHECK(says(error(j.dump()), "p.json: report schema version 1"));
  // a part that lost results without having been interrupted
  j = nlohmann::json::parse(good);
  j["part"]["results"].erase(0);
  std::vector<Part> parts = {parse_part(j.dump(), "short.json"), parse_part(part_text(whole_run(), 1, 2), "b.json")};
  CHECK(says(merge_error(parts), "short.json: "));
  CHECK(says(merge_error(parts), "the part says it was not interrupted"));
}

TEST_CASE("an interrupted part makes an interrupted run, which never passes") {
  Report whole = whole_run();
  for (auto& c : whole.cases) c.status = Status::Passed, c.flags.clear();
  auto parts = parts_of(whole, 2);
  REQUIRE(merge_parts(parts).all_passed());
  parts[0].report.meta.interrupted = "stopped by TERM after 1 of 11 cases; the others did not run";
  parts[0].report.cases.resize(1);
  parts[0].info.positions.resize(1);
  const Report merged = merge_parts(parts);
  CHECK(says(merged.meta.interrupted, "part 1/2 (part1.json) stopped by TERM"));
  CHECK(!merged.all_passed());
}
