#include "replay/case_json.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

namespace bb::replay {
namespace {

nlohmann::json timing(const std::optional<Timing>& t) {
  if (!t) return nullptr;
  return {t->median, t->q1, t->q3, t->min, t->samples, t->events_median};
}

std::optional<Timing> timing(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return Timing{j.at(0).get<double>(), j.at(1).get<double>(), j.at(2).get<double>(),
                j.at(3).get<double>(), j.at(4).get<int>(),    j.size() > 5 ? j.at(5).get<double>() : 0.0};
}

// nlohmann writes NaN and infinities as null; they come back as NaN.
double number(const nlohmann::json& j) { return j.is_null() ? std::nan("") : j.get<double>(); }

Status status_from(const std::string& s) {
  for (Status st : {Status::Passed, Status::Failed, Status::Crashed, Status::Timeout, Status::Skipped, Status::Invalid})
    if (s == to_string(st)) return st;
  throw std::invalid_argument("unknown status " + s);
}

}  // namespace

nlohmann::json case_to_json(const CaseResult& r) {
  return {{"op", r.op},
          {"signature", r.signature},
          {"variant", r.variant},
          {"calls", r.calls},
          {"status", to_string(r.status)},
          {"message", r.message},
          {"flags", verify::flag_names(r.flags)},
          {"abs", r.max_abs_error},
          {"rel", r.max_rel_error},
          {"rtol", r.rtol},
          {"atol", r.atol},
          {"native", timing(r.native)},
          {"generated", timing(r.generated)},
          {"unstable", r.unstable},
          {"worker_s", r.worker_s},
          {"spent", r.spent},
          {"statistics", r.statistics},
          {"wall_s", r.wall_s},
          {"traced_device_us", r.traced_device_us},
          {"aten_allowed", r.aten_allowed}};
}

std::string case_to_json_line(const CaseResult& r) {
  return case_to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

CaseResult case_from_json_line(const std::string& line) {
  try {
    return case_from_json(nlohmann::json::parse(line));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed result line: ") + e.what());
  }
}

CaseResult case_from_json(const nlohmann::json& j) {
  try {
    CaseResult r;
    r.op = j.at("op");
    r.signature = j.at("signature");
    r.variant = j.at("variant");
    r.calls = j.at("calls");
    r.status = status_from(j.at("status"));
    r.message = j.at("message");
    for (const std::string& name : j.at("flags").get<std::vector<std::string>>()) {
      const auto flag = verify::flag_from_name(name);
      if (!flag) throw std::invalid_argument("malformed result line: unknown flag '" + name + "'");
      r.flags.push_back(*flag);
    }
    r.max_abs_error = number(j.at("abs"));
    r.max_rel_error = number(j.at("rel"));
    r.rtol = number(j.at("rtol"));
    r.atol = number(j.at("atol"));
    r.native = timing(j.at("native"));
    r.generated = timing(j.at("generated"));
    r.unstable = j.at("unstable");
    r.worker_s = j.at("worker_s");
    r.spent = j.at("spent").get<std::vector<std::pair<std::string, double>>>();
    r.statistics = j.value("statistics", "");
    r.wall_s = j.value("wall_s", 0.0);
    r.traced_device_us = j.value("traced_device_us", 0.0);
    r.aten_allowed = j.value("aten_allowed", std::vector<std::string>{});
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed result: ") + e.what());
  }
}

}  // namespace bb::replay
