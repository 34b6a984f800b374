// Op names <-> backend folder names, as BackendBench names them: "." becomes "__", and the
// default overload is spelled "default" (aten::relu <-> relu__default, aten::add.Tensor <-> add__Tensor).
#pragma once

#include <optional>
#include <string>

namespace bb::backends {

// "add__Tensor" -> "aten::add.Tensor"; "relu__default" -> "aten::relu". nullopt when the name has
// no "__<overload>" part.
std::optional<std::string> op_from_folder(const std::string& folder);

// "aten::add.Tensor" -> "add__Tensor"; "aten::relu" -> "relu__default".
std::string folder_from_op(const std::string& op);

}  // namespace bb::backends
