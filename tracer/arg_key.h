// Call signatures as compact, exact keys (hot path) and as trace arguments (first sighting only).
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::tracer {

using KeyWords = std::vector<uint64_t>;

// Appends an exact encoding of everything in `v` that defines a call signature: tensor dtype, device,
// layout, shape, stride and storage offset; scalar and list values. Two values with equal encodings
// are the same signature; no hashing is involved in that decision. Never throws. blind_floats: float
// values (also complex, and inside lists) encoded as 0 — the key of a signature's float variants,
// those equal to it but for the values of float scalars.
void encode_key(const c10::IValue& v, KeyWords& out, bool blind_floats = false);

uint64_t hash_key(const uint64_t* words, size_t n);

// Describes one argument for the trace. `schema_arg` gives the name and the declared type, which
// tells dtype/layout/memory-format values apart from plain ints.
trace::ArgValue describe_arg(const c10::IValue& v, const c10::Argument* schema_arg, size_t index);

// The tensor part of describe_arg, for a defined tensor.
trace::TensorMeta describe_tensor(const at::Tensor& t);

}  // namespace bb::tracer
