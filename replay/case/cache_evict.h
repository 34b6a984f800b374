// Host memory around a timed run on the CPU: its operands evicted from the caches before (each timed run
// reads them from memory), its results touched inside the clock after (work deferred into their first
// access is the call's).
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

namespace bb::replay {

// Evicts the memory of every tensor in `values` from every cache level (x86 clflushopt or clflush), so that each
// timed run reads its operands from memory, without making the code, the allocator and the page
// tables cold as well: flushing the whole 260 MB last-level cache of the development host made an
// empty relu cost 90 µs instead of 1 µs, which would have drowned every small kernel.
void evict(const std::vector<c10::IValue>& values);

// Reads two bytes of every page the results' elements span (host memory), at places drawn from `seed`
// (not the first byte of a page: memory whose fault handler recognised a fixed pattern of reads could
// map placeholders for them), so that memory computing itself on first access (a protected mapping with
// a fault handler, userfaultfd) does that work inside the clock. Both sides pay it alike.
void touch(const std::vector<c10::IValue>& results, uint64_t seed);

}  // namespace bb::replay
