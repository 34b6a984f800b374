#include "tracer/devtime/signature_wants.h"

namespace bb::devtime {

SignatureWants::~SignatureWants() {
  for (auto& c : chunks_) delete[] c.load();
}

std::atomic<uint32_t>* SignatureWants::slot(uint32_t sig, bool create) {
  if (sig >= kChunks * kChunk) return nullptr;
  auto& chunk = chunks_[sig >> kChunkBits];
  std::atomic<uint32_t>* c = chunk.load(std::memory_order_acquire);
  if (!c && create) {
    std::lock_guard<std::mutex> lock(grow_);
    c = chunk.load(std::memory_order_acquire);
    if (!c) {
      c = new std::atomic<uint32_t>[kChunk];
      for (uint32_t k = 0; k < kChunk; ++k) c[k].store(0, std::memory_order_relaxed);
      chunk.store(c, std::memory_order_release);
    }
  }
  return c ? &c[sig & (kChunk - 1)] : nullptr;
}

SignatureWants::Want SignatureWants::wants(uint32_t sig) {
  std::atomic<uint32_t>* s = slot(sig, true);
  if (!s) return Want::No;
  uint32_t v = s->load(std::memory_order_relaxed);
  if (v == 0 && s->compare_exchange_strong(v, kSeen | calls_)) {
    seen_.fetch_add(1, std::memory_order_relaxed);
    if (calls_ > 0) short_.fetch_add(1, std::memory_order_relaxed);
    return calls_ > 0 ? Want::First : Want::No;
  }
  // Seen again: from now on it repeats (the one transition, by whichever thread wins it).
  while (!(v & kRepeats)) {
    if (s->compare_exchange_weak(v, v | kRepeats)) {
      if (v & kOwed) short_repeating_.fetch_add(1, std::memory_order_relaxed);
      v |= kRepeats;
      break;
    }
  }
  return (v & kOwed) ? Want::Again : Want::No;
}

bool SignatureWants::credit(uint32_t sig) {
  std::atomic<uint32_t>* s = slot(sig, false);
  if (!s) return false;
  uint32_t v = s->load(std::memory_order_relaxed);
  while (v & kOwed)
    if (s->compare_exchange_weak(v, v - 1)) {
      const bool repeats = (v & kRepeats) != 0;
      if ((v & kOwed) == 1) {
        short_.fetch_sub(1, std::memory_order_relaxed);
        if (repeats) short_repeating_.fetch_sub(1, std::memory_order_relaxed);
      }
      return repeats;
    }
  return false;
}

uint64_t SignatureWants::refresh() {
  uint64_t n = 0;
  for (auto& chunk : chunks_) {
    std::atomic<uint32_t>* c = chunk.load(std::memory_order_acquire);
    if (!c) continue;
    for (uint32_t k = 0; k < kChunk; ++k) {
      uint32_t v = c[k].load(std::memory_order_relaxed);
      while (v != 0 && (v & kOwed) == 0) {
        if (c[k].compare_exchange_weak(v, v + 1)) {
          short_.fetch_add(1, std::memory_order_relaxed);
          if (v & kRepeats) short_repeating_.fetch_add(1, std::memory_order_relaxed);
          ++n;
          break;
        }
      }
    }
  }
  return n;
}

}  // namespace bb::devtime
