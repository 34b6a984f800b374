// First-calls device timing: how many more timed calls each signature wants, and whether it repeats.
// Lock-free on the op path (two atomic loads per call); signatures are the tracer's dense ids, in
// chunks allocated as they first appear.
//
// A signature seen once so far may never come again — a step-dependent scalar (AdamW's step size)
// makes a new signature every step — so it does not keep a window open: only signatures seen at least
// twice (repeating) count in short_repeating() and as progress.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace bb::devtime {

class SignatureWants {
 public:
  explicit SignatureWants(uint32_t calls) : calls_(calls) {}
  ~SignatureWants();
  SignatureWants(const SignatureWants&) = delete;
  SignatureWants& operator=(const SignatureWants&) = delete;

  enum class Want { No, First, Again };  // no more wanted; wanted, first sight; wanted, seen before
  // A call of `sig` starts: what it wants. A signature seen for the first time wants `calls`.
  Want wants(uint32_t sig);
  // A call of `sig` was timed whole: true if it was wanted and `sig` repeats (progress that keeps a
  // window open); the call counts towards what `sig` wants either way.
  bool credit(uint32_t sig);
  // Every signature that has what it wanted wants one more (timing follows drift). Returns how many.
  uint64_t refresh();

  uint64_t short_of() const { return short_.load(std::memory_order_relaxed); }  // signatures wanting more
  uint64_t short_repeating() const { return short_repeating_.load(std::memory_order_relaxed); }
  uint64_t seen() const { return seen_.load(std::memory_order_relaxed); }
  uint32_t calls() const { return calls_; }

 private:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunk = 1u << kChunkBits;
  static constexpr uint32_t kChunks = (1u << 24) >> kChunkBits;  // signature ids are 24 bits
  // Per signature: 0 unseen; else kSeen, kRepeats once seen again, and in the low bits the timed
  // calls it still wants.
  static constexpr uint32_t kSeen = 1u << 31, kRepeats = 1u << 30, kOwed = kRepeats - 1;
  std::atomic<uint32_t>* slot(uint32_t sig, bool create);

  const uint32_t calls_;
  std::array<std::atomic<std::atomic<uint32_t>*>, kChunks> chunks_{};
  std::mutex grow_;
  std::atomic<uint64_t> short_{0}, short_repeating_{0}, seen_{0};
};

}  // namespace bb::devtime
