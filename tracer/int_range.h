// Observed value ranges of integer tensors, so replay can rebuild valid indices.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace bb::tracer {

using IntRange = std::pair<int64_t, int64_t>;

// A dense CPU/CUDA tensor with its own memory: no tensor subclass, functional or vmap wrapper,
// nested, sparse, symbolic-shaped or zero tensor. Only these have their values read.
bool is_plain_dense(const at::Tensor& t);

// True for the dtypes whose value range the tracer records (integers, not bool).
bool wants_range(c10::ScalarType t);

// [min, max] of a strided CPU integer tensor, read straight from memory (no ATen op, no copy).
// nullopt when the tensor is empty, not on the CPU, not strided, or its data cannot be read.
std::optional<IntRange> cpu_int_range(const at::Tensor& t);

}  // namespace bb::tracer
