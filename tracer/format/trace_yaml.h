// Trace <-> YAML (format in docs/trace-format.md). No torch dependency.
#pragma once

#include <string>

#include "tracer/format/input.h"
#include "tracer/format/trace_model.h"

namespace bb::trace {

// A trace that cannot be read: the readers' positioned error (tracer/format/input.h), by the name
// the trace readers' callers know it.
using FormatError = format::InputError;

std::string to_yaml(const Trace& trace);

// `source` names the text in error messages (a file path).
Trace parse_trace(const std::string& text, const std::string& source);

// Reads a file (format::read_input_file); a missing or unreadable file is a FormatError at line 0.
Trace load_trace(const std::string& path);

}  // namespace bb::trace
