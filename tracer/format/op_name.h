// Op names as traces, the dispatcher and backends spell them: "aten::add.Tensor" is the name
// "aten::add" and the overload "Tensor"; the default overload is empty ("aten::relu").
#pragma once

#include <string>
#include <utility>

namespace bb::trace {

// "aten::add.Tensor" -> {"aten::add", "Tensor"}; "aten::relu" -> {"aten::relu", ""}.
std::pair<std::string, std::string> split_op(const std::string& op);

// {"aten::add", "Tensor"} -> "aten::add.Tensor"; an empty (or null) overload gives the name alone.
std::string join_op(const std::string& name, const char* overload);
inline std::string join_op(const std::string& name, const std::string& overload) {
  return join_op(name, overload.c_str());
}

// Whether `op` is spelled with the characters op names have (letters, digits, '_', '.', ':'): a name
// with spaces or control characters is no op, and would not survive being written and read back.
bool plausible_op_name(const std::string& op);

// Python's name for an op without its overload: aten::add.Tensor -> aten::add.
std::string base_name(const std::string& op);

}  // namespace bb::trace
