// A case result as one line of JSON: how a replay worker hands results to its parent.
#pragma once

#include <string>

#include "replay/report.h"

namespace bb::replay {

std::string case_to_json_line(const CaseResult& r);
// Throws std::invalid_argument on a malformed line.
CaseResult case_from_json_line(const std::string& line);

}  // namespace bb::replay
