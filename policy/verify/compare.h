// Comparing a kernel's outputs with native ones: per-dtype tolerances, NaN positions must agree,
// integers and bools exactly. Used by shadow mode (and replay). Runs ATen ops: callers keep them
// out of routing and tracing.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "policy/verify/tolerance.h"

namespace bb::verify {

struct Mismatch {
  std::string what;    // shape, dtype, values, kind, count
  std::string detail;  // human text: where and by how much
  double max_abs = 0;  // over finite elements
  double max_rel = 0;
  int64_t first_index = -1;  // flat index of the first element outside tolerance
};

using ToleranceFn = std::function<Tolerance(c10::ScalarType)>;

// The largest absolute and relative differences seen over the elements whose difference is finite.
struct ErrorStats {
  double max_abs = 0, max_rel = 0;
  void add(double abs_error, double rel_error);
};

// nullopt when `actual` matches `expected`. Compared on expected's device, in one pass; where both
// have the same shape and dtype, their errors are added to `stats` (if given) whether they match or not.
// An infinite atol and rtol without `stats` compares what the values are not: defined, shape, dtype.
std::optional<Mismatch> compare_tensors(const at::Tensor& expected, const at::Tensor& actual, Tolerance tol,
                                        ErrorStats* stats = nullptr);

// The second chance of a floating-point result that is not within tolerance of native: judged against
// `reference`, the same op computed in float64, with native's own error as the yardstick (a kernel that
// sums in another order is as right as native, and native is not always right: float32 gelu(inf) is
// NaN on the CPU). Element i passes when actual equals native or the reference exactly (NaN equals
// NaN), or |actual - r| <= atol + rtol |r| + 2 max|native - r| (the max over finite elements) +
// rounding, where `rounding` (same shape as native, or undefined) is the rounding error a correct
// computation in native's dtype may make on each element in another order (a reduction summing in
// another order than native's: replay's rounding_allowance).
std::optional<Mismatch> compare_with_reference(const at::Tensor& native, const at::Tensor& actual,
                                               const at::Tensor& reference, Tolerance tol,
                                               const at::Tensor& rounding = {});

// Whether each pair is equal element for element in at::equal's sense (NaN equal to nothing), each pair of
// the same shape, dtype and device. On a GPU every pair's difference is reduced on the device and read
// once for them all, not once per pair (a list op's hundreds of tensors). False where any pair differs;
// then the caller compares them one by one to say how.
bool all_equal(const std::vector<std::pair<at::Tensor, at::Tensor>>& pairs);
// The tensors of two values (a tensor each, or lists or tuples of them, nested), paired in order and
// appended to `out`, for all_equal; false where the two differ in structure or hold anything but
// tensors (then they are compared element by element).
bool tensor_pairs(const c10::IValue& a, const c10::IValue& b, std::vector<std::pair<at::Tensor, at::Tensor>>& out);

// Tensors, lists and tuples of them, and scalars; `path` names the output in messages.
std::optional<Mismatch> compare_values(const c10::IValue& expected, const c10::IValue& actual,
                                       const ToleranceFn& tolerance, const std::string& path = "output",
                                       ErrorStats* stats = nullptr);

// Where the strides of two result lists disagree where they mean something (dimensions longer than 1),
// as text ("result 0 has strides [1, 4], native [4, 1]"); "" when they agree.
std::string stride_mismatch(const std::vector<c10::IValue>& native, const std::vector<c10::IValue>& generated);

}  // namespace bb::verify
