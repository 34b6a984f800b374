// Poisoned allocations: what a kernel allocates holds a chosen byte, not what an earlier call left
// there, so that two runs poisoned differently show the output memory it never wrote
// (verify::unwritten_elements).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace bb::replay {

// Installs (once) a CPU allocator that fills new allocations with a byte pattern while a PoisonScope
// is alive on any thread, and does nothing otherwise (one relaxed atomic load per allocation).
void install_poisoning_allocator();

// What a kernel allocates while this is alive holds `byte`, not what an earlier call left there: CPU
// allocations are filled by the allocator above, CUDA caching-allocator allocations by a memset on their
// stream as they are handed out (poison_cuda_allocations). Every allocation, whatever its size or the
// state of the cache; the memory still free in the cache is not touched.
class PoisonScope {
 public:
  explicit PoisonScope(uint8_t byte, const c10::Device& device = c10::Device(c10::kCPU));
  ~PoisonScope();
  PoisonScope(const PoisonScope&) = delete;
  PoisonScope& operator=(const PoisonScope&) = delete;

 private:
  bool cpu_, cuda_ = false;
};

// Bytes two runs use: 0xFF makes floats NaN and integers -1; 0x5A is an ordinary-looking value.
inline constexpr uint8_t kPoisonA = 0xFF, kPoisonB = 0x5A;

}  // namespace bb::replay
