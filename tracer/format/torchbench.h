// TorchBench operator-input logs (PyTorch's benchmarks/dynamo/microbenchmarks/operator_inp_logs):
//   Operator: aten.add.Tensor
//   cnt: 12, ((T([4, 1024, 768], f16), T([4, 1024, 768], f16, stride=(0, 768, 1))), {'alpha': 2})
// read by a parser for the subset of Python literal syntax they use (never by evaluating text), and
// written from a trace. No torch dependency.
#pragma once

#include <string>

#include "tracer/format/trace_model.h"

namespace bb::trace {

// True when the text's first non-blank line starts with "Operator: ".
bool looks_like_torchbench(const std::string& text);

// Positional arguments are named arg0, arg1, ...; keyword arguments keep their names and are marked
// kwarg_only. Schema types are unknown (""); tensors are on "cuda" (where the logs were recorded).
// Python objects written as <...> become `other` values holding that text.
// Problems throw trace::FormatError with the line and column.
trace::Trace parse_torchbench(const std::string& text, const std::string& source);

struct TorchBenchText {
  std::string text;
  size_t skipped = 0;  // entries with values the format cannot express (symbolic shapes, offsets, generators)
};
TorchBenchText to_torchbench(const trace::Trace& trace);

// Either format, by content.
trace::Trace load_any_trace(const std::string& path);

}  // namespace bb::trace
