#include "replay/report/case_json.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace bb::replay {
namespace {

using ordered = nlohmann::ordered_json;

// The entries of `spent` that the writer adds to the worker's phases (derived, never read back).
constexpr const char* kOtherInWorker = "other in the worker";
constexpr const char* kWorkerStart = "worker start and messaging";

// nlohmann writes NaN and infinities as null; they come back as NaN.
double number(const ordered& j) { return j.is_null() ? std::nan("") : j.get<double>(); }

ordered text_or_null(const std::string& s) { return s.empty() ? ordered(nullptr) : ordered(s); }

std::string text(const ordered& j) { return j.is_null() ? "" : j.get<std::string>(); }

ordered timing_json(const std::optional<Timing>& t) {
  if (!t) return nullptr;
  nlohmann::json j = {
      {"median_us", t->median}, {"q1_us", t->q1}, {"q3_us", t->q3}, {"min_us", t->min}, {"samples", t->samples}};
  if (t->events_median > 0) j["events_median_us"] = t->events_median;  // CUDA: the events' cross-check
  return j;
}

std::optional<Timing> timing(const ordered& j) {
  if (j.is_null()) return std::nullopt;
  Timing t{number(j.at("median_us")), number(j.at("q1_us")), number(j.at("q3_us")), number(j.at("min_us")),
           j.at("samples").get<int>()};
  if (j.contains("events_median_us")) t.events_median = number(j.at("events_median_us"));
  return t;
}

// Seconds by phase, the worker's own remainder ("other in the worker") and what the worker did not see
// (its start, messages: "worker start and messaging") added, so that the phases sum to wall_s.
ordered spent_json(const CaseResult& c) {
  ordered j = ordered::object();
  double phases = 0;
  for (const auto& [phase, seconds] : c.spent) {
    j[phase] = seconds;
    phases += seconds;
  }
  if (c.worker_s > 0) j[kOtherInWorker] = std::max(0.0, c.worker_s - phases);
  if (c.wall_s > 0) j[kWorkerStart] = std::max(0.0, c.wall_s - std::max(c.worker_s, phases));
  return j;
}

std::vector<std::pair<std::string, double>> spent_from(const ordered& j) {
  std::vector<std::pair<std::string, double>> spent;
  for (const auto& [phase, seconds] : j.items())
    if (phase != kOtherInWorker && phase != kWorkerStart) spent.emplace_back(phase, number(seconds));
  return spent;
}

Status status_from(const std::string& s) {
  for (Status st : {Status::Passed, Status::Failed, Status::Crashed, Status::Timeout, Status::Skipped, Status::Invalid})
    if (s == to_string(st)) return st;
  throw std::invalid_argument("unknown status " + s);
}

std::vector<verify::Flag> flags_from(const ordered& j) {
  std::vector<verify::Flag> flags;
  for (const std::string& name : j.get<std::vector<std::string>>()) {
    const auto flag = verify::flag_from_name(name);
    if (!flag) throw std::invalid_argument("malformed result: unknown flag '" + name + "'");
    flags.push_back(*flag);
  }
  return flags;
}

}  // namespace

ordered case_to_json(const CaseResult& c, std::optional<double> speedup) {
  ordered j = {{"op", c.op},
               {"signature", c.signature},
               {"variant", c.variant},
               {"calls", c.calls},
               {"status", to_string(c.status)},
               {"flags", verify::flag_names(c.flags)},
               {"message", c.message},
               {"max_abs_error", c.max_abs_error},
               {"max_rel_error", c.max_rel_error},
               {"rtol", c.rtol},
               {"atol", c.atol},
               {"native", timing_json(c.native)},
               {"generated", timing_json(c.generated)},
               {"unstable", text_or_null(c.unstable)},
               {"speedup", speedup ? ordered(*speedup) : nullptr},
               {"traced_device_us", c.traced_device_us},
               {"statistics", text_or_null(c.statistics)},
               {"wall_s", c.wall_s},
               {"worker_s", c.worker_s},
               {"spent", spent_json(c)}};
  if (!c.aten_allowed.empty()) j["aten_allowed"] = c.aten_allowed;  // (only where the policy allows)
  return j;
}

CaseResult case_from_json(const ordered& j) {
  try {
    CaseResult r;
    r.op = j.at("op");
    r.signature = j.at("signature");
    r.variant = j.at("variant");
    r.calls = j.at("calls");
    r.status = status_from(j.at("status"));
    r.flags = flags_from(j.at("flags"));
    r.message = j.at("message");
    r.max_abs_error = number(j.at("max_abs_error"));
    r.max_rel_error = number(j.at("max_rel_error"));
    r.rtol = number(j.at("rtol"));
    r.atol = number(j.at("atol"));
    r.native = timing(j.at("native"));
    r.generated = timing(j.at("generated"));
    r.unstable = text(j.at("unstable"));
    r.traced_device_us = number(j.at("traced_device_us"));
    r.statistics = text(j.at("statistics"));
    r.wall_s = number(j.at("wall_s"));
    r.worker_s = number(j.at("worker_s"));
    r.spent = spent_from(j.at("spent"));
    r.aten_allowed = j.value("aten_allowed", std::vector<std::string>{});
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed result: ") + e.what());
  }
}

std::string case_to_json_line(const CaseResult& r) {
  return case_to_json(r, r.speedup()).dump(-1, ' ', false, ordered::error_handler_t::replace) + "\n";
}

CaseResult case_from_json_line(const std::string& line) {
  try {
    return case_from_json(ordered::parse(line));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed result line: ") + e.what());
  }
}

}  // namespace bb::replay
