// bbtrace merge: the traces of the processes of one program (torchrun writes bbtrace.rank<R>.yaml per
// rank) as one trace (docs/trace-format.md, "Merged traces"). No torch dependency.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::trace {

struct MergeOptions {
  // Device indices renumbered per process, in the order of its meta.devices (rank 3's cuda:3 becomes
  // cuda:0), so that the same call on every rank is one signature. false: kept as traced.
  bool renumber_devices = true;
};

// Traces that cannot be merged (different torch or bbshim versions, one process twice): what() names
// the files.
class TraceMergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `files` names each trace in messages and in meta.merged_from. Ordered by rank where every trace has
// one, else as given. Signatures equal but for their observed integer ranges are one entry: counts
// summed, ranges joined, device time combined (count, total, min and max exactly; the median as the
// median of the processes' medians weighted by their timed calls, an approximation).
Trace merge_traces(const std::vector<Trace>& traces, const std::vector<std::string>& files,
                   const MergeOptions& options = {});

}  // namespace bb::trace
