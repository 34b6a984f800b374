#include "replay/case/cache_evict.h"

#include "replay/workers/tamper.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace bb::replay {
namespace {
// clflushopt, where the CPU has it (CPUID leaf 7, EBX bit 23), flushes the lines of one tensor without
// ordering each flush after the previous one: 3-4x fewer cycles per line than clflush. Either is
// ordered by the mfence that ends evict().
#if defined(__x86_64__) || defined(__i386__)
bool has_clflushopt() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
  }();
  return has;
}

__attribute__((target("clflushopt"))) void flush_lines_unordered(const char* q, const char* end) {
  for (; q < end; q += 64) _mm_clflushopt(const_cast<char*>(q));
}
#endif

void flush_lines(const char* q, const char* end) {
#if defined(__x86_64__) || defined(__i386__)
  if (has_clflushopt()) return flush_lines_unordered(q, end);
  for (; q < end; q += 64) _mm_clflush(q);
#elif defined(__aarch64__)
  for (; q < end; q += 64) asm volatile("dc civac, %0" ::"r"(q) : "memory");
#endif
}

void evict_tensor(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || !t.has_storage()) return;
  const auto* p = static_cast<const char*>(t.storage().data());
  if (!p) return;
  const size_t line = 64;
  flush_lines(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) & ~(line - 1)), p + t.storage().nbytes());
}

}  // namespace

void evict(const std::vector<c10::IValue>& values) {
  for (const auto& v : values) {
    if (v.isTensor()) evict_tensor(v.toTensor());
    if (v.isList())
      for (const auto& e : v.toListRef())
        if (e.isTensor()) evict_tensor(e.toTensor());
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_mfence();
#elif defined(__aarch64__)
  asm volatile("dsb sy" ::: "memory");
#endif
}

BB_TIMING_PATH void touch(const std::vector<c10::IValue>& results, uint64_t seed) {
  constexpr uintptr_t kPage = 4096;
  volatile unsigned char sink = 0;
  uint64_t x = seed | 1;
  auto next = [&] {  // xorshift64*: cheap, and unknown to the kernel until the run's seed is
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
  };
  for (const c10::IValue& v : results) {
    std::vector<at::Tensor> ts;
    if (v.isTensor()) ts.push_back(v.toTensor());
    if (v.isList())
      for (const auto& e : v.toListRef())
        if (e.isTensor()) ts.push_back(e.toTensor());
    for (const at::Tensor& t : ts) {
      if (!t.defined() || !t.is_cpu() || t.layout() != at::kStrided || !t.has_storage() || t.numel() == 0) continue;
      const uintptr_t first = reinterpret_cast<uintptr_t>(t.const_data_ptr());
      const uintptr_t end = first + at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.itemsize());
      for (uintptr_t page = first & ~(kPage - 1); page < end; page += kPage) {
        const uintptr_t lo = std::max(page, first), hi = std::min(page + kPage, end);
        for (int k = 0; k < 2; ++k)
          sink = sink + *reinterpret_cast<const volatile unsigned char*>(lo + next() % (hi - lo));
      }
    }
  }
}

}  // namespace bb::replay
