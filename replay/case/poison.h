// Poisoned allocations: what a kernel allocates holds a chosen byte, not what an earlier call left
// there, so that two runs poisoned differently show the output memory it never wrote
// (verify::unwritten_elements).
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <string>

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

// While alive, CPU allocations get red zones (install_poisoning_allocator's allocator): kRedZone bytes
// of a pattern before and after each, checked by out_of_bounds_writes() and as each is freed. A kernel
// that writes past either end of its output, its scratch memory or an argument made in the scope (a
// missing mask, an off-by-one row) is seen, whatever its results are. CUDA allocations get theirs where
// install_cuda_red_zones() has wrapped the caching allocator (replay/timing/cuda_red_zones.h).
class RedZoneScope {
 public:
  RedZoneScope();
  ~RedZoneScope();
  RedZoneScope(const RedZoneScope&) = delete;
  RedZoneScope& operator=(const RedZoneScope&) = delete;
};
inline constexpr size_t kRedZone = 4096;

// "" or the first write outside an allocation made in a RedZoneScope since the last call: in those
// still alive (checked now; on CUDA after the device is synchronized) or freed meanwhile. Forgets what
// it reports.
std::string out_of_bounds_writes();

// Bytes two runs use: 0xFF makes floats NaN and integers -1; 0x5A is an ordinary-looking value.
inline constexpr uint8_t kPoisonA = 0xFF, kPoisonB = 0x5A;

}  // namespace bb::replay
