// `bbtrace summary TRACE --backend DIR`: before any replay, what share of the traced program (by
// calls, and by device time where the trace has it) a backend folder would have judged, and what
// not and why, with bbreplay's own reasons (replay/judgeable/judgeable.h), tally (tally_coverage) and line
// (coverage_line). Without torch: the folder's ops are read from its folder names (not compiled),
// and what only torch knows is said, not guessed. No torch dependency.
#pragma once

#include <ostream>
#include <set>
#include <string>

#include "replay/report/report.h"
#include "tracer/format/trace_model.h"

namespace bb::replay {

// The ops a backend folder has kernels for, by its folder names (backends/op_names.h).
std::set<std::string> backend_ops(const std::string& dir);

// Why bbreplay would not judge a traced call of an op the backend has a kernel for, as far as the
// trace tells; "" when it would (or when only torch could tell otherwise).
std::string reason_without_torch(const trace::TraceEntry& entry);

// One item per signature of the trace (bbreplay's traced case of it).
std::vector<CoverageItem> coverage_items(const trace::Trace& trace, const std::set<std::string>& kernels);

void print_coverage_preview(const trace::Trace& trace, const std::string& dir, std::ostream& out);

}  // namespace bb::replay
