#include "backends/op_names.h"

#include "tracer/format/op_name.h"

namespace bb::backends {

std::optional<std::string> op_from_folder(const std::string& folder) {
  auto sep = folder.rfind("__");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= folder.size()) return std::nullopt;
  std::string name = folder.substr(0, sep), overload = folder.substr(sep + 2);
  return trace::join_op("aten::" + name, overload == "default" ? "" : overload);
}

std::string folder_from_op(const std::string& op) {
  auto [name, overload] = trace::split_op(op);
  auto colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  return name + "__" + (overload.empty() ? "default" : overload);
}

}  // namespace bb::backends
