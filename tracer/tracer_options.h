// The observer's options (start_tracing, observer.h), apart from it so that the preload's settings
// (shim/config.h) hold them without including torch.
#pragma once

#include <cstddef>

namespace bb::tracer {

struct TracerOptions {
  size_t max_signatures = 100000;  // BB_MAX_SIGNATURES: distinct signatures kept; later new ones are only counted
  bool int_ranges = true;          // BB_INT_RANGES: record value ranges of integer tensor inputs
};

}  // namespace bb::tracer
