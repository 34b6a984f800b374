// Cache eviction before a timed run on the CPU: each timed run reads its operands from memory.
#pragma once

#include <ATen/core/ivalue.h>

#include <vector>

namespace bb::replay {

// Evicts the memory of every tensor in `values` from every cache level (x86 clflushopt or clflush), so that each
// timed run reads its operands from memory, without making the code, the allocator and the page
// tables cold as well: flushing the whole 260 MB last-level cache of the development host made an
// empty relu cost 90 µs instead of 1 µs, which would have drowned every small kernel.
void evict(const std::vector<c10::IValue>& values);

}  // namespace bb::replay
