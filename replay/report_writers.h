// One writer per output format, behind one interface. Each output carries the report schema version.
#pragma once

#include <memory>
#include <string>

#include "replay/report.h"

namespace bb::replay {

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  virtual std::string render(const Report& report) const = 0;
};

// "console" (aligned table for a terminal), "json", "csv" (one row per case), "markdown".
// nullptr for an unknown format.
std::unique_ptr<ReportWriter> make_writer(const std::string& format);

}  // namespace bb::replay
