// The spellings TorchBench operator-input logs use for dtypes and other torch names, shared by the
// reader (torchbench_read.cpp) and the writer (torchbench_write.cpp). Internal to tracer/format.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "tracer/format/trace_model.h"

namespace bb::trace::torchbench {

// torch.<name> spellings the logs use besides dtypes: layouts and memory formats.
const std::map<std::string, std::pair<ArgKind, std::string>>& torch_names();

// "f16" or "torch.float16" -> "float16"; "" when the token names no dtype.
std::string dtype_from_token(const std::string& tok);

// "float16" -> "f16"; a dtype without an abbreviation as "torch.<name>".
std::string abbr_of(const std::string& dtype);

}  // namespace bb::trace::torchbench
