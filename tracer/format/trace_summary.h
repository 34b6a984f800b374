// A human summary of a trace: what ran, how often, with how many distinct signatures.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::trace {

struct SummaryOptions {
  size_t top = 20;        // ops listed, by calls
  size_t signatures = 0;  // also list this many signatures, by calls
};

// A signature in one line: tensors as dtype[shape], lists and scalars as values.
std::string signature_text(const trace::TraceEntry& entry);
// The same for a signature's arguments alone.
std::string args_text(const std::vector<trace::ArgValue>& args);

// The device time the program spent in a signature's calls, scaled to all of them where the trace
// timed a sample; 0 without device time.
double traced_device_us(const trace::TraceEntry& entry);

void print_summary(const trace::Trace& trace, const std::string& source, const SummaryOptions& options,
                   std::ostream& out);

}  // namespace bb::trace
