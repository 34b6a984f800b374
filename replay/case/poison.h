// Poisoned allocations: what a kernel allocates holds a chosen byte, not what an earlier call left
// there, so that two runs poisoned differently show the output memory it never wrote
// (verify::unwritten_elements).
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>

namespace bb::replay {

// Installs (once) a CPU allocator that fills new allocations with a byte pattern while a PoisonScope
// is alive on any thread, and does nothing otherwise (one relaxed atomic load per allocation).
void install_poisoning_allocator();

// What a kernel allocates while this is alive holds `byte`, not what an earlier call left there.
// CPU: new allocations are filled (the allocator above). CUDA: on entry the free blocks of the CUDA
// caching allocator's cache on the device are filled, each from its start up to max(`reserve`, 64 MiB)
// bytes, after at least `reserve` bytes were made free in it (the kernel's allocations come out of that
// cache, carved from a free block's start; allocations beyond that much from one block, or larger than
// what is free there, get memory not poisoned).
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

}  // namespace bb::replay
