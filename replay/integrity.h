// Run-time checks for kernels that cheat (docs/integrity.md): output memory they never wrote, results
// cached across calls, outputs aliasing inputs or earlier outputs, lower precision than claimed.
// Each finding is a named flag on the case; the checks use no knowledge of the kernel's source.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/integrity.h"
#include "policy/policy.h"

namespace bb::replay {

using Values = std::vector<c10::IValue>;

// Installs (once) a CPU allocator that fills new allocations with a byte pattern while a PoisonScope
// is alive on any thread, and does nothing otherwise (one relaxed atomic load per allocation).
void install_poisoning_allocator();

// What a kernel allocates while this is alive holds `byte`, not what an earlier call left there.
// CPU: new allocations are filled (the allocator above). CUDA: on entry every free block of the CUDA
// caching allocator's cache on the device is filled, after at least `reserve` bytes were made free in
// it (the kernel's allocations come out of that cache; one larger than what is free there gets fresh
// device memory, not poisoned).
class PoisonScope {
 public:
  explicit PoisonScope(uint8_t byte, const c10::Device& device = c10::Device(c10::kCPU), size_t reserve = 0);
  ~PoisonScope();
  PoisonScope(const PoisonScope&) = delete;
  PoisonScope& operator=(const PoisonScope&) = delete;

 private:
  bool cpu_;
};

// Bytes two runs use: 0xFF makes floats NaN and integers -1; 0x5A is an ordinary-looking value.
inline constexpr uint8_t kPoisonA = 0xFF, kPoisonB = 0x5A;

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

// (shared with the preload's routing: policy/integrity.h)
using policy::aliasing;
using policy::shares_storage;

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

}  // namespace bb::replay
