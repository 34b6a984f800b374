// Device time of calls that were not timed (docs/trace-format.md, "estimated_total_ns"): with
// BB_DEVICE_TIME=first or sampled timing, only some calls of a signature are timed. No torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::trace {

// The device time of all `count` calls of a signature from its timed ones: the timed calls' total,
// plus the median of the timed calls for each call not timed (the median, not the mean: a first call
// that also ran cuDNN's or cuBLAS's tuning is counted once, as it ran, not once per call).
uint64_t extrapolate(const DeviceTime& d, uint64_t count);

// An entry's device time for all its calls: estimated_total_ns where the trace has one, else the total
// of its timed calls (every call timed: the untimed ones launched nothing); 0 without a device time.
uint64_t estimated_ns(const TraceEntry& e);

// The signature's key (signature_key()) with the values of its float scalars left out (Float,
// Complex, FloatList values; a list's length stays): equal for calls that differ only in such values.
std::string similar_key(TraceEntry e);

// Entries none of whose calls was timed get a device time from timed entries of the same op and the
// same arguments but for the values of float scalars (Float, Complex, FloatList — a step-dependent
// learning-rate factor makes a new signature every step; same tensors, same kernels): their
// timed-call-weighted median per call, times the entry's count, marked from_similar. Only for traces
// whose timing left calls out on purpose (first-calls, windows): where every call is timed, an
// untimed signature launched nothing. Returns how many entries got one.
size_t estimate_from_similar(std::vector<TraceEntry>& ops);

}  // namespace bb::trace
