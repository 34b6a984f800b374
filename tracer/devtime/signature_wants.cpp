#include "tracer/devtime/signature_wants.h"

namespace bb::devtime {

SignatureWants::~SignatureWants() {
  for (auto& c : chunks_) delete[] c.load();
}

SignatureWants::Slot* SignatureWants::slot(uint32_t sig, bool create) {
  if (sig >= kChunks * kChunk) return nullptr;
  auto& chunk = chunks_[sig >> kChunkBits];
  Slot* c = chunk.load(std::memory_order_acquire);
  if (!c && create) {
    std::lock_guard<std::mutex> lock(grow_);
    c = chunk.load(std::memory_order_acquire);
    if (!c) {
      c = new Slot[kChunk];
      chunk.store(c, std::memory_order_release);
    }
  }
  return c ? &c[sig & (kChunk - 1)] : nullptr;
}

uint32_t SignatureWants::now_ms() const {
  return static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - base_).count());
}

SignatureWants::Want SignatureWants::wants(uint32_t sig) {
  Slot* s = slot(sig, true);
  if (!s) return Want::No;
  uint32_t v = s->state.load(std::memory_order_acquire);  // first_ms is written before the state
  if (v == 0) {
    if (repeat_gap_ms_) {  // before it can be seen again
      const uint32_t t = now_ms();
      s->first_ms.store(t, std::memory_order_relaxed);
      s->last_ms.store(t, std::memory_order_relaxed);
    }
    const bool variant = calls_ > 0 && is_variant_ && is_variant_(sig);
    const uint32_t first = variant ? kSeen | kVariant : kSeen | calls_;
    if (s->state.compare_exchange_strong(v, first)) {
      seen_.fetch_add(1, std::memory_order_relaxed);
      if (variant) variants_.fetch_add(1, std::memory_order_relaxed);
      if (first & kOwed) short_.fetch_add(1, std::memory_order_relaxed);
      return (first & kOwed) ? Want::New : Want::No;
    }
  }
  if (!(v & kRepeats)) {
    // Seen again: it repeats once past the gap (the one transition, by whichever thread wins it); a
    // float variant then wants its own calls.
    if (repeat_gap_ms_) {
      const uint32_t t = now_ms();
      if (t - s->first_ms.load(std::memory_order_relaxed) < repeat_gap_ms_) {
        if (!(v & kOwed)) return Want::No;
        wanted_at(s, t, false);
        return Want::New;
      }
    }
    while (!(v & kRepeats)) {
      const uint32_t next = (v & kVariant) ? (v & ~kVariant) | kRepeats | calls_ : v | kRepeats;
      if (s->state.compare_exchange_weak(v, next)) {
        if (!(v & kRetired)) repeating_.fetch_add(1, std::memory_order_relaxed);
        if (v & kVariant) {
          variants_.fetch_sub(1, std::memory_order_relaxed);
          short_.fetch_add(1, std::memory_order_relaxed);
        }
        if (next & kOwed) short_repeating_.fetch_add(1, std::memory_order_relaxed);
        v = next;
        break;
      }
    }
  }
  if (!(v & kOwed)) return Want::No;
  if (repeat_gap_ms_) wanted_at(s, now_ms(), true);
  return Want::Again;
}

void SignatureWants::wanted_at(Slot* s, uint32_t t, bool repeats) {
  const uint32_t gap = t - s->last_ms.load(std::memory_order_relaxed);
  if (gap > s->gap_ms.load(std::memory_order_relaxed)) s->gap_ms.store(gap, std::memory_order_relaxed);
  s->last_ms.store(t, std::memory_order_relaxed);
  if (repeats && gap > recent_gap_.load(std::memory_order_relaxed)) recent_gap_.store(gap, std::memory_order_relaxed);
}

size_t SignatureWants::retire_absent(std::chrono::steady_clock::time_point now, uint32_t slack_ms, uint32_t gap_cap_ms,
                                     size_t max, std::vector<uint32_t>* shown) {
  if (!repeat_gap_ms_ || short_repeating() == 0) return 0;
  const auto t = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now - base_).count());
  size_t n = 0;
  for (uint32_t c = 0; c < kChunks; ++c) {
    Slot* chunk = chunks_[c].load(std::memory_order_acquire);
    if (!chunk) continue;
    for (uint32_t k = 0; k < kChunk; ++k) {
      Slot& s = chunk[k];
      uint32_t v = s.state.load(std::memory_order_relaxed);
      if (!(v & kRepeats) || !(v & kOwed)) continue;
      const uint32_t last = s.last_ms.load(std::memory_order_relaxed);
      uint32_t gap = s.gap_ms.load(std::memory_order_relaxed);
      if (gap_cap_ms && gap > gap_cap_ms) gap = gap_cap_ms;
      if (t <= last || t - last <= 2 * gap + slack_ms) continue;
      // Seen meanwhile (the state changed): it is not gone.
      if (!s.state.compare_exchange_strong(v, (v & ~kRepeats) | kRetired)) continue;
      short_repeating_.fetch_sub(1, std::memory_order_relaxed);
      retired_.fetch_add(1, std::memory_order_relaxed);
      if (shown && shown->size() < max) shown->push_back((c << kChunkBits) | k);
      ++n;
    }
  }
  return n;
}

std::vector<SignatureWants::Short> SignatureWants::short_repeating_list(size_t max) const {
  std::vector<Short> out;
  for (uint32_t c = 0; c < kChunks && out.size() < max; ++c) {
    const Slot* chunk = chunks_[c].load(std::memory_order_acquire);
    if (!chunk) continue;
    for (uint32_t k = 0; k < kChunk && out.size() < max; ++k) {
      const uint32_t v = chunk[k].state.load(std::memory_order_relaxed);
      if ((v & kRepeats) && (v & kOwed))
        out.push_back({(c << kChunkBits) | k, v & kOwed, chunk[k].first_ms.load(std::memory_order_relaxed),
                       chunk[k].last_ms.load(std::memory_order_relaxed)});
    }
  }
  return out;
}

bool SignatureWants::credit(uint32_t sig, bool* counted) {
  if (counted) *counted = false;
  Slot* s = slot(sig, false);
  if (!s) return false;
  uint32_t v = s->state.load(std::memory_order_relaxed);
  while (v & kOwed)
    if (s->state.compare_exchange_weak(v, v - 1)) {
      const bool repeats = (v & kRepeats) != 0;
      if ((v & kOwed) == 1) {
        short_.fetch_sub(1, std::memory_order_relaxed);
        if (repeats) short_repeating_.fetch_sub(1, std::memory_order_relaxed);
      }
      if (counted) *counted = true;
      return repeats;
    }
  return false;
}

void SignatureWants::uncredit(uint32_t sig) {
  Slot* s = slot(sig, false);
  if (!s) return;
  uint32_t v = s->state.load(std::memory_order_relaxed);
  while (v != 0 && (v & kOwed) < kOwed)
    if (s->state.compare_exchange_weak(v, v + 1)) {
      if ((v & kOwed) == 0) {  // wanted again: its absence counts from now (retire_absent)
        if (repeat_gap_ms_) s->last_ms.store(now_ms(), std::memory_order_relaxed);
        short_.fetch_add(1, std::memory_order_relaxed);
        if (v & kRepeats) short_repeating_.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
}

uint64_t SignatureWants::refresh() {
  uint64_t n = 0;
  const uint32_t t = repeat_gap_ms_ ? now_ms() : 0;
  for (auto& chunk : chunks_) {
    Slot* c = chunk.load(std::memory_order_acquire);
    if (!c) continue;
    for (uint32_t k = 0; k < kChunk; ++k) {
      uint32_t v = c[k].state.load(std::memory_order_relaxed);
      while (v != 0 && (v & (kOwed | kVariant)) == 0) {  // a variant not known to repeat was never timed
        if (c[k].state.compare_exchange_weak(v, v + 1)) {
          // Wanted from now: its absence counts from here (retire_absent), and the gap to its next call
          // is at most its period.
          if (repeat_gap_ms_) c[k].last_ms.store(t, std::memory_order_relaxed);
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
