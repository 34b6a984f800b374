// Trace <-> YAML (format in docs/trace-format.md). No torch dependency.
#pragma once

#include <stdexcept>
#include <string>

#include "tracer/trace_model.h"

namespace bb::trace {

// A trace that cannot be read. what() is "file:line:column: message" (1-based line and column).
class FormatError : public std::runtime_error {
 public:
  FormatError(const std::string& source, int line, int column, const std::string& message);
  const std::string& source() const { return source_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  std::string source_;
  int line_;
  int column_;
};

std::string to_yaml(const Trace& trace);

// `source` names the text in error messages (a file path).
Trace parse_trace(const std::string& text, const std::string& source);

// Reads a file; a missing or unreadable file is a FormatError at line 0.
Trace load_trace(const std::string& path);

}  // namespace bb::trace
