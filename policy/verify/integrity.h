// Integrity checks shared by the preload's routing (route and shadow modes) and bbreplay: which
// results share memory with arguments or with each other, and whether two values are the same.
// Runs ATen ops (comparisons): callers keep them out of routing and tracing.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/verify/values.h"

namespace bb::verify {

// The defined tensors among the first `limit` values, lists opened.
std::vector<at::Tensor> tensors_of(const Values& values, size_t limit = SIZE_MAX);

// Whether two tensors' storages overlap (empty or storage-less tensors overlap nothing).
bool overlap(const at::Tensor& a, const at::Tensor& b);

// Pairs (result k, input i) and (result k, result j) that share storage, as text such as
// "result 0 shares memory with argument 'self'". `outputs` counts the op's returns (the leading
// entries of `results`); only those are examined.
std::vector<std::string> aliasing(const c10::FunctionSchema& schema, const Values& args, const Values& results,
                                  size_t outputs);

// The first entry of aliasing() for the kernel's call (args, results) that native's call of the same op
// (native_args, native_results) does not show; "" when none.
std::string aliasing_native_lacks(const c10::FunctionSchema& schema, const Values& native_args,
                                  const Values& native_results, const Values& args, const Values& results,
                                  size_t outputs);

// Sharing that the schema does not declare: a return overlapping an argument or another return with
// which it has no alias set in common (`Tensor(a) self -> Tensor(a)` declares views and in-place
// results). "" when none; else the first, as text.
std::string undeclared_aliasing(const c10::FunctionSchema& schema, const Values& args, const Values& results);

// Whether any returned tensor of `later` shares storage with one of `earlier`. Returned tensors inside the
// memory of `exempt` (the later call's own arguments: in-place, out= and view results are that memory by
// design, which aliasing() judges) are not looked at.
bool shares_storage(const Values& earlier, const Values& later, size_t outputs, const Values& exempt = {});

// Whether the schema lets the op write this argument (in-place, out=: `Tensor(a!)`).
bool writable(const c10::Argument& a);

// Whether the op's results are new memory that nothing else sees: no return aliases an argument and
// no argument is written (not in-place, not out=, not a view).
bool functional(const c10::FunctionSchema& schema);

// Per argument, whether it differs between `before` and `after` (identical() false) although the
// schema does not let the op write it.
std::vector<bool> unwritable_changes(const c10::FunctionSchema& schema, const Values& before, const Values& after);

// The name of the first argument that unwritable_changes() marks and `allowed` (per argument; shorter
// or empty: none allowed) does not; "" when none.
std::string first_unwritable_change(const c10::FunctionSchema& schema, const Values& before, const Values& after,
                                    const std::vector<bool>& allowed = {});

// Equal values: tensors equal element by element with no tolerance (NaN equals NaN), lists element by
// element; anything else counts as equal (not compared).
bool identical(const c10::IValue& a, const c10::IValue& b);

}  // namespace bb::verify
