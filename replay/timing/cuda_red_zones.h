// Red zones on CUDA memory, for the kernel's process (the CPU's are replay/case/poison.h's): while on,
// every block the CUDA caching allocator hands out through the c10 allocator interface (tensors, and
// what torch and Triton kernels allocate for themselves) is asked for kCudaRedZone bytes larger at each
// end, and those bytes hold kZoneByte. A kernel that writes past either end of its output, its scratch
// memory or an argument made while on (a missing mask, an index of -100 where an ignored target was meant
// to be skipped) is seen, whatever its results are and wherever the cache placed the block — a write the
// device would not fault on, into memory the cache holds free or another tensor's. Zones are checked by
// cuda_out_of_bounds_writes() (the device synchronized first) and as each block is freed; blocks freed
// while on are kept from reuse (up to kCudaQuarantine bytes) until that check, so a write into one after
// it was freed shows too. Raw allocations (raw_alloc: library workspaces) get none.
#pragma once

#include <cstddef>
#include <string>

namespace bb::replay {

inline constexpr size_t kCudaRedZone = 4096;
inline constexpr size_t kCudaQuarantine = size_t{512} << 20;

// Puts (once) a wrapper in front of the process's CUDA caching allocator: it adds the zones while
// cuda_red_zones(true) is in force and passes everything else through. False, with nothing changed,
// where this build has no CUDA parts, there is no device, or the allocator is not the native caching one
// (the cudaMallocAsync backend).
bool install_cuda_red_zones();

// Nested: zones are added while the count of calls with true exceeds those with false.
void cuda_red_zones(bool on);

// "" or the first write outside a zoned CUDA allocation since the last call: in those still alive
// (checked now, after the device is synchronized) or freed meanwhile. Forgets what it reports and
// frees the blocks kept from reuse.
std::string cuda_out_of_bounds_writes();

// The allocator torch's CUDA tensors take their memory from (c10::cuda::CUDACachingAllocator::get()),
// opaque; null where this build has no CUDA parts. For the kernel worker's process-state check: a kernel
// that put another in its place would take its allocations out of the red zones and the poisoning.
void* cuda_allocator();
// Puts `allocator` (a value cuda_allocator() returned) back in place.
void set_cuda_allocator(void* allocator);

}  // namespace bb::replay
