#include "tracer/format/op_name.h"

#include <cctype>

namespace bb::trace {

std::pair<std::string, std::string> split_op(const std::string& op) {
  auto colon = op.rfind("::");
  auto dot = op.find('.', colon == std::string::npos ? 0 : colon + 2);
  if (dot == std::string::npos) return {op, ""};
  return {op.substr(0, dot), op.substr(dot + 1)};
}

std::string join_op(const std::string& name, const char* overload) {
  return overload && *overload ? name + "." + overload : name;
}

std::string base_name(const std::string& op) { return split_op(op).first; }

bool plausible_op_name(const std::string& op) {
  if (op.empty()) return false;
  for (unsigned char c : op)
    if (!std::isalnum(c) && c != '_' && c != '.' && c != ':') return false;
  return true;
}

}  // namespace bb::trace
