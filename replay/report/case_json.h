// A case's result as JSON, one schema wherever a CaseResult is written: a case of the JSON report
// ("cases", report_writers.h), the line a reference worker hands bbreplay, and a part's results
// (bbreplay --shard, for bbreplay merge). docs/replay.md lists its keys.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "replay/report/report.h"

namespace bb::replay {

// Every field, exactly (wall_s, worker_s and traced_device_us too: a part's results are the parent's), plus
// what the report derives from them: `speedup` (the case's as the report gives it, Report::speedup_of) and,
// in `spent`, the worker's time outside the phases and the time the worker did not see.
nlohmann::ordered_json case_to_json(const CaseResult& r, std::optional<double> speedup);
// The fields back, the derived ones left out. Throws std::invalid_argument on a malformed object.
CaseResult case_from_json(const nlohmann::ordered_json& j);

// One line of case_to_json (its speedup: the case's own, CaseResult::speedup).
std::string case_to_json_line(const CaseResult& r);
// Throws std::invalid_argument on a malformed line.
CaseResult case_from_json_line(const std::string& line);

}  // namespace bb::replay
