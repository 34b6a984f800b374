// Which ATen ops a generated kernel may call without handing its work to ATen: allocation, view,
// copy and fill ops. Any other op called from inside a generated kernel is a native call, and so is
// the kernel's own op and every op that does the same work (a clone kernel calling aten::copy_).
#pragma once

#include <string>

namespace bb::backends {

// `op` is a full overload name (aten::add.Tensor). Names outside aten:: are not ops: allowed.
bool is_plumbing_op(const std::string& op);

// Whether a kernel for `kernel_op` may call `op` (both full overload names): `op` is plumbing and
// does not do `kernel_op`'s work (the same op under any overload, or one of its kin: clone, copy_,
// _to_copy and contiguous copy; fill_, zero_, zeros and full fill).
bool is_plumbing_for(const std::string& kernel_op, const std::string& op);

}  // namespace bb::backends
