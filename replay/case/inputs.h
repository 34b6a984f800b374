// Rebuilding a traced call: bind the trace's arguments to the op's schema and make fresh, seeded
// input values for it (docs/replay.md, "Inputs").
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::replay {

// A traced call bound to its op: one trace argument (or the schema default) per schema argument.
struct BoundCall {
  c10::OperatorHandle op;
  std::vector<std::optional<trace::ArgValue>> args;  // nullopt: use the schema's default
};

// Binds by name (our traces), else by position (argN, TorchBench logs); keyword arguments by name.
// Throws std::invalid_argument with the reason (unknown op, missing or unknown argument).
BoundCall bind_call(const trace::TraceEntry& entry);

// How the values of one case are made.
struct InputOptions {
  c10::Device device = c10::kCPU;
  uint64_t seed = 0;
  std::string variant = "traced";  // traced | noncontiguous | special-values | large-values | empty | scalar | odd-size
  // Values drawn on `device` by its own generator (same seed, other values than the CPU's; no
  // host-side filling and copying of large inputs). Off: drawn on the CPU, the same on every device.
  bool on_device = false;
};

// Why a call cannot be rebuilt (nondeterministic op, symbolic shapes, ...), or "". A random op's
// reason starts with kRandomOp (replay/judgeable/judgeable.h); those in replay/judgeable/random_ops.h are judged by
// their properties all the same (replay/random/random_judge.h).
std::string unreplayable(const BoundCall& call);

// Why a call's arguments cannot be rebuilt (symbolic shapes, sparse tensors, opaque objects), or "".
std::string unrebuildable(const BoundCall& call);

// Whether a variant makes a different, meaningful case of this call (noncontiguous needs a contiguous
// tensor to change, special-values and large-values a floating-point one; empty, scalar and odd-size need tensors of
// one shape, so that the call stays valid).
bool variant_applies(const BoundCall& call, const std::string& variant);

// Adds to `bytes` the storage of every tensor in `v` (lists and tuples included) that is not in `seen`
// yet, and puts it there: each storage counted once over several calls. Saturates at UINT64_MAX.
void add_storage_bytes(const c10::IValue& v, std::set<const void*>& seen, uint64_t& bytes);

// The bytes a case's values take: its inputs' storages, each counted once, and its results' where
// native's meta kernel can say what they are (results sharing an input's storage count nothing more;
// without a meta kernel, results as large as the largest input are assumed).
// Known before anything is allocated, from tensors that hold no data. nullopt when the inputs cannot
// be made (the case says why when it runs). Saturates at UINT64_MAX.
std::optional<uint64_t> case_bytes(const BoundCall& call, const std::string& variant);

// Fresh input values for the call; the same options always give the same values. Throws
// std::invalid_argument when the variant does not apply to this call.
std::vector<c10::IValue> make_inputs(const BoundCall& call, const InputOptions& options);

}  // namespace bb::replay
