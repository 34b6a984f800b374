// One writer per output format, behind one interface. Each output carries the report schema version.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "replay/report/report.h"

namespace bb::replay {

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  virtual std::string render(const Report& report) const = 0;
};

// "console" (aligned table for a terminal), "json", "csv" (one row per case), "markdown".
// nullptr for an unknown format.
std::unique_ptr<ReportWriter> make_writer(const std::string& format);

// The coverage line every report has (and `bbtrace summary --backend`): "judged 97.3% of the traced
// calls (...), 95.1% of the traced device time; not judged, largest first: op (reason) share, ...".
std::string coverage_line(const Coverage& c);

// A speedup as every report shows it: "1.67x", "-" for none.
std::string speedup_text(const std::optional<double>& s);

}  // namespace bb::replay
