// Checks on a kernel's results for kernels that cheat (docs/integrity.md): output memory they never
// wrote (two runs, allocations poisoned differently: replay/case/poison.h), results cached across calls,
// lower precision than claimed. The checks use no knowledge of the kernel's source.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/verify/integrity.h"

namespace bb::verify {

// Per result, per tensor in it (one, or each of a Tensor[] result), a boolean tensor of the elements
// whose bytes differ between `a` and `b`; undefined where none differ or they cannot be compared.
using ElementMasks = std::vector<std::vector<at::Tensor>>;
ElementMasks differing_elements(const Values& a, const Values& b);

// Elements of `a` and `b` (the same kernel on the same inputs, allocations poisoned differently)
// whose bytes differ: memory the kernel did not write, leaving out those `native_unwritten` marks
// (elements native does not write either). "" when none; else a description.
std::string unwritten_elements(const Values& a, const Values& b, const ElementMasks& native_unwritten = {});

// Bitwise equality of every tensor in two result lists.
bool bitwise_equal(const Values& a, const Values& b);

// Precision downgrade (docs/integrity.md). The lower floating-point types a result of type `t` could
// have been computed in, most precise first: float16 and bfloat16 below float32 and float64,
// bfloat16 below float16.
std::vector<c10::ScalarType> lower_precisions(c10::ScalarType t);

// Whether `actual` is within `lower`'s tolerance of the float64 `reference` (a computation in `lower`
// could explain its error).
bool within_tolerance_of(const at::Tensor& actual, const at::Tensor& reference, c10::ScalarType lower);

// Whether `actual`'s values are values of `lower`, as results rounded through it are: every element
// whose reference is not itself a value of `lower` is one (those that are say nothing), and at least
// 16 such elements exist.
bool rounded_through(const at::Tensor& actual, const at::Tensor& reference, c10::ScalarType lower);

}  // namespace bb::verify
