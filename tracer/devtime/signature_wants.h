// First-calls device timing: how many more timed calls each signature wants, and whether it repeats.
// Lock-free on the op path (two atomic loads per call once a signature is known to repeat); signatures
// are the tracer's dense ids, in chunks allocated as they first appear.
//
// A signature may never come again after its first calls — a step-dependent scalar (AdamW's step
// size) makes a new signature every step, used once or a few times within that step — so it must not
// keep a window open or open one for itself. A signature counts as repeating only once it is seen
// again at least `repeat_gap_ms` after its first sight (later than one step's burst); only repeating
// signatures count in short_repeating() and as progress.
//
// A float variant — a signature that differs from an earlier one only in float scalars' values, told
// by `is_variant` at its first sight — wants nothing until it repeats: the trace estimates its device
// time from the signatures it is a variant of (docs/trace-format.md, from_similar). AdamW's per-step
// variants then never open a window; one that repeats wants its own timed calls like any other.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace bb::devtime {

class SignatureWants {
 public:
  using IsVariant = bool (*)(uint32_t sig);
  // repeat_gap_ms 0: seen a second time at all is repeating. is_variant may be null (no variants).
  explicit SignatureWants(uint32_t calls, uint32_t repeat_gap_ms = 0, IsVariant is_variant = nullptr)
      : calls_(calls),
        repeat_gap_ms_(repeat_gap_ms),
        is_variant_(is_variant),
        base_(std::chrono::steady_clock::now()) {}
  ~SignatureWants();
  SignatureWants(const SignatureWants&) = delete;
  SignatureWants& operator=(const SignatureWants&) = delete;

  // No: no more wanted. New: wanted, not known to repeat (first sight, or seen again within the
  // repeat gap). Again: wanted, repeats.
  enum class Want { No, New, Again };
  // A call of `sig` starts: what it wants. A signature seen for the first time wants `calls`, a float
  // variant nothing until it repeats.
  Want wants(uint32_t sig);
  // A call of `sig` was timed whole: true if it was wanted and `sig` repeats (progress that keeps a
  // window open); the call counts towards what `sig` wants either way (*counted: it did, `sig` wanted
  // more).
  bool credit(uint32_t sig, bool* counted = nullptr);
  // A call credit() counted was left out after all (a record of it came back unfinished): `sig` wants
  // it again.
  void uncredit(uint32_t sig);
  // Every signature that has what it wanted wants one more (timing follows drift), float variants
  // not known to repeat aside. Returns how many.
  uint64_t refresh();
  // Repeating signatures short of calls that have not been seen for more than twice their gap plus
  // slack_ms (by `now`) stop counting as repeating: they hold no window (one made in the first steps
  // only — lazy initialization — never comes back). Their gap: the longest between their wanted calls,
  // at most gap_cap_ms where that is not 0 (a first step with lazy initialization can take a second,
  // so gaps seen in it say little about the loop). Seen again, such a signature repeats again at once
  // and wants what it still wanted. Returns those retired now (the first `max` of them in `shown`).
  size_t retire_absent(std::chrono::steady_clock::time_point now, uint32_t slack_ms, uint32_t gap_cap_ms, size_t max,
                       std::vector<uint32_t>* shown);
  // The longest gap between two wanted calls of a repeating signature ending since the last take (ms):
  // about a loop's period while its signatures are being timed.
  uint32_t recent_gap() const { return recent_gap_.load(std::memory_order_relaxed); }
  uint32_t take_recent_gap() { return recent_gap_.exchange(0, std::memory_order_relaxed); }
  uint64_t retired() const { return retired_.load(std::memory_order_relaxed); }  // so far

  uint64_t short_of() const { return short_.load(std::memory_order_relaxed); }  // signatures wanting more
  uint64_t short_repeating() const { return short_repeating_.load(std::memory_order_relaxed); }
  uint64_t seen() const { return seen_.load(std::memory_order_relaxed); }
  uint64_t repeating() const { return repeating_.load(std::memory_order_relaxed); }  // ever seen to repeat
  uint64_t variants() const { return variants_.load(std::memory_order_relaxed); }    // seen, wanting nothing
  uint32_t calls() const { return calls_; }

  // Why a window stays open: repeating signatures still short of timed calls (the first `max` in id
  // order), with how many they still want and when they were first and last seen (ms since this
  // object was made; last: the latest call that wanted timing).
  struct Short {
    uint32_t sig = 0, owed = 0, first_ms = 0, last_ms = 0;
  };
  std::vector<Short> short_repeating_list(size_t max) const;
  std::chrono::steady_clock::time_point base() const { return base_; }  // ms 0

 private:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunk = 1u << kChunkBits;
  static constexpr uint32_t kChunks = (1u << 24) >> kChunkBits;  // signature ids are 24 bits
  // Per signature: 0 unseen; else kSeen, kRepeats once seen again past the gap, kVariant for a float
  // variant, kRetired once retire_absent() took it for gone, and in the low bits the timed calls it
  // still wants; when it was first seen and when last wanted (ms since base_), and the longest gap
  // between its wanted calls (all three with repeat_gap_ms > 0 only).
  static constexpr uint32_t kSeen = 1u << 31, kRepeats = 1u << 30, kVariant = 1u << 29, kRetired = 1u << 28,
                            kOwed = kRetired - 1;
  struct Slot {
    std::atomic<uint32_t> state{0};
    std::atomic<uint32_t> first_ms{0};
    std::atomic<uint32_t> last_ms{0};
    std::atomic<uint32_t> gap_ms{0};
  };
  void wanted_at(Slot* s, uint32_t t, bool repeats);  // a wanted call now: last_ms, gap_ms, recent_gap_
  Slot* slot(uint32_t sig, bool create);
  uint32_t now_ms() const;

  const uint32_t calls_;
  const uint32_t repeat_gap_ms_;
  const IsVariant is_variant_;
  const std::chrono::steady_clock::time_point base_;
  std::array<std::atomic<Slot*>, kChunks> chunks_{};
  std::mutex grow_;
  std::atomic<uint64_t> short_{0}, short_repeating_{0}, seen_{0}, repeating_{0}, variants_{0}, retired_{0};
  std::atomic<uint32_t> recent_gap_{0};
};

}  // namespace bb::devtime
