// A case result as JSON: one line of it is how a replay worker hands results to its parent; the same
// object is how a part of a run (bbreplay --shard) keeps its results for bbreplay merge.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "replay/report.h"

namespace bb::replay {

std::string case_to_json_line(const CaseResult& r);
// Throws std::invalid_argument on a malformed line.
CaseResult case_from_json_line(const std::string& line);

// Every field, exactly (wall_s and traced_device_us too: a part's results are the parent's).
nlohmann::json case_to_json(const CaseResult& r);
// Throws std::invalid_argument on a malformed object.
CaseResult case_from_json(const nlohmann::json& j);

}  // namespace bb::replay
