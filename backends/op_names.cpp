#include "backends/op_names.h"

namespace bb::backends {

std::optional<std::string> op_from_folder(const std::string& folder) {
  auto sep = folder.rfind("__");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= folder.size()) return std::nullopt;
  std::string name = folder.substr(0, sep), overload = folder.substr(sep + 2);
  return "aten::" + name + (overload == "default" ? "" : "." + overload);
}

std::pair<std::string, std::string> split_op(const std::string& op) {
  auto colon = op.rfind("::");
  auto dot = op.find('.', colon == std::string::npos ? 0 : colon + 2);
  if (dot == std::string::npos) return {op, ""};
  return {op.substr(0, dot), op.substr(dot + 1)};
}

std::string folder_from_op(const std::string& op) {
  auto [name, overload] = split_op(op);
  auto colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  return name + "__" + (overload.empty() ? "default" : overload);
}

}  // namespace bb::backends
