// Which ATen ops a generated kernel may call without handing its work to ATen: allocation, view, copy
// and fill ops, in-place changes of metadata alone (detach_, squeeze_: ATen's inplace_view tag), and ops
// that take and return no tensor (promote_types). Any other op called from inside
// a generated kernel is a native call, and so is the kernel's own op and every op that does the same
// work (a clone kernel calling aten::copy_).
#pragma once

#include <string>
#include <vector>

namespace bb::backends {

// `op` is a full overload name (aten::add.Tensor). Names outside aten:: are not ops: allowed.
bool is_plumbing_op(const std::string& op);

// Whether a kernel for `kernel_op` may call `op` (both full overload names): `op` is plumbing and
// does not do `kernel_op`'s work (the same op under any overload, or one of its kin: clone, copy_,
// _to_copy and contiguous copy; fill_, zero_, zeros and full fill).
bool is_plumbing_for(const std::string& kernel_op, const std::string& op);

// Whether `op` does the work of a kernel for `kernel_op`: its own op under any overload, or a plumbing op
// of its kin (a clone kernel's copy_). Never allowed inside a kernel, whatever a policy says.
bool does_work_of(const std::string& kernel_op, const std::string& op);

// ATen compute ops a routing policy lets kernels call (docs/policy.md, `allow_aten`): none by default;
// every one (`all`), or those named: "aten::exp" (every overload of exp) or "aten::add.Tensor" (that one).
struct AtenAllowance {
  bool all = false;
  std::vector<std::string> ops;
  bool empty() const { return !all && ops.empty(); }
};

// Whether a kernel for `kernel_op` may call the compute op `op` under `allow`. Never its own op (any
// overload) nor a plumbing op doing its work (a clone kernel's copy_), whatever the policy says: such a
// kernel measures nothing of its own.
bool is_allowed_for(const std::string& kernel_op, const std::string& op, const AtenAllowance& allow);

}  // namespace bb::backends
