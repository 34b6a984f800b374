#include "replay/parts/part.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "backends/content_hash.h"
#include "replay/report/case_json.h"
#include "replay/report/report_writers.h"
#include "tracer/format/input.h"
#include "tracer/format/trace_yaml.h"

namespace bb::replay {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

std::string read_whole(const std::string& path) {
  try {
    return format::read_input_file(path);
  } catch (const trace::FormatError& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

void add_tree(backends::ContentHash& h, const fs::path& dir, const std::string& relative) {
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (name.empty() || name[0] == '.' || name == "__pycache__") continue;
    const auto st = fs::symlink_status(p);
    if (fs::is_directory(st)) {
      add_tree(h, p, relative + name + "/");
    } else if (fs::is_regular_file(fs::status(p))) {
      h.add(relative + name);
      h.add(read_whole(p.string()));
    }
  }
}

json not_judged_json(const NotJudged& n) {
  return {{"op", n.op}, {"reason", n.reason}, {"calls", n.calls}, {"device_us", n.device_us}};
}

// The report's meta as the JSON writer wrote it, with the part's list of what no case covers.
ReportMeta meta_from(const ordered& j, const ordered& part) {
  ReportMeta m;
  m.tool = j.at("tool");
  m.trace = j.at("trace");
  m.backend = j.at("backend");
  m.device = j.at("device");
  m.torch = j.at("torch");
  m.date = j.at("date");
  m.timing = j.at("timing");
  m.seed = j.at("seed");
  m.self_check = j.at("self_check");
  m.interrupted = j.value("interrupted", "");
  for (const auto& n : part.at("not_replayed"))
    m.not_replayed.push_back({n.at("op"), n.at("reason"), n.at("calls"), n.at("device_us")});
  return m;
}

PartInfo info_from(const ordered& p) {
  PartInfo info;
  info.shard.k = p.at("k");
  info.shard.n = p.at("n");
  for (const auto& [what, value] : p.at("run").items()) info.identity.emplace_back(what, value.get<std::string>());
  info.cases_total = p.at("cases_total");
  info.cases_hash = p.at("cases_hash");
  info.assigned = p.at("assigned").get<std::vector<size_t>>();
  info.estimated_cost_us = p.value("estimated_cost_us", uint64_t{0});
  return info;
}

}  // namespace

std::string hash_file(const std::string& path) {
  backends::ContentHash h;
  h.add(read_whole(path));
  return "content hash " + h.hex();
}

std::string hash_folder(const std::string& dir) {
  backends::ContentHash h;
  try {
    add_tree(h, fs::path(dir), "");
  } catch (const fs::filesystem_error& e) {
    throw std::runtime_error(std::string("cannot read the backend folder: ") + e.what());
  }
  return "content hash " + h.hex();
}

std::string render_part(const Report& report, const PartInfo& info) {
  ordered j = ordered::parse(make_writer("json")->render(report));
  json p;
  p["schema"] = "bbreplay-part";
  p["version"] = kPartVersion;
  p["k"] = info.shard.k;
  p["n"] = info.shard.n;
  p["run"] = json::object();
  for (const auto& [what, value] : info.identity) p["run"][what] = value;
  p["cases_total"] = info.cases_total;
  p["cases_hash"] = info.cases_hash;
  p["estimated_cost_us"] = info.estimated_cost_us;
  p["assigned"] = info.assigned;
  p["not_replayed"] = json::array();
  for (const auto& n : report.meta.not_replayed) p["not_replayed"].push_back(not_judged_json(n));
  j["part"] = ordered::parse(p.dump(-1, ' ', false, json::error_handler_t::replace));
  // Each case as the report has it (the same function wrote it), with its position in the run.
  ordered& results = j["part"]["results"] = ordered::array();
  const auto flagged = report.flagged_ops();
  for (size_t i = 0; i < report.cases.size(); ++i) {
    results.push_back(case_to_json(report.cases[i], Report::speedup_of(report.cases[i], flagged)));
    results.back()["case"] = info.positions.at(i);
  }
  return j.dump(1, ' ', false, ordered::error_handler_t::replace) + "\n";
}

Part parse_part(const std::string& text, const std::string& file) {
  ordered j;  // (in the file's order: a case's phases are in the order they were charged)
  try {
    j = ordered::parse(text);
  } catch (const json::parse_error& e) {
    throw MergeError(file + ": not JSON (a truncated or malformed part?): " + e.what());
  }
  if (!j.is_object() || j.value("schema", ordered()) != "bbreplay-report")
    throw MergeError(file + ": not a bbreplay report (no \"schema\": \"bbreplay-report\")");
  if (j.value("schema_version", ordered()) != kReportSchema)
    throw MergeError(file + ": report schema version " + j.value("schema_version", ordered()).dump() +
                     "; this bbreplay reads " + std::to_string(kReportSchema));
  if (!j.contains("part"))
    throw MergeError(file + ": the report of a whole run, not a part (bbreplay --shard K/N --json F writes parts)");
  const ordered& p = j["part"];
  try {
    if (p.at("schema") != "bbreplay-part" || p.at("version") != kPartVersion)
      throw MergeError(file + ": part format " + p.at("version").dump() + "; this bbreplay reads " +
                       std::to_string(kPartVersion));
    Part part;
    part.file = file;
    part.info = info_from(p);
    part.report.meta = meta_from(j.at("meta"), p);
    for (const auto& c : p.at("results")) {
      part.info.positions.push_back(c.at("case"));
      part.report.cases.push_back(case_from_json(c));
    }
    return part;
  } catch (const json::exception& e) {
    throw MergeError(file + ": malformed part: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw MergeError(file + ": malformed part: " + e.what());
  }
}

Part load_part(const std::string& file) {
  try {
    return parse_part(read_whole(file), file);
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const MergeError*>(&e)) throw;
    throw MergeError(e.what());
  }
}

}  // namespace bb::replay
