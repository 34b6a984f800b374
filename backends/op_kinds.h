// Which ATen ops a generated kernel may call without handing its work to ATen: allocation, view,
// copy and fill ops. Any other op called from inside a generated kernel is a native call.
#pragma once

#include <string>

namespace bb::backends {

// `op` is a full overload name (aten::add.Tensor). Names outside aten:: are not ops: allowed.
bool is_plumbing_op(const std::string& op);

}  // namespace bb::backends
