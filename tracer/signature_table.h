// Per-thread signature table: the owning thread finds or adds a signature's counters without locks;
// the writer thread reads the published counters concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tracer/arg_key.h"

namespace bb::tracer {

// Where an integer tensor sits in a call: argument index, and element index within a tensor list.
struct RangeTarget {
  uint16_t arg;
  uint16_t elem;
};

struct Counters {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> nested{0};
  std::atomic<uint64_t> with_children{0};
  std::atomic<uint64_t> routed{0};
  // Sampled tracing (tracer/trace_sampling.h): of the above, the calls seen while sampling, each of
  // which stands for `every` calls.
  std::atomic<uint64_t> sampled_count{0};
  std::atomic<uint64_t> sampled_nested{0};
  std::atomic<uint64_t> sampled_with_children{0};
};

// Single-writer increment: only the owning thread writes, others read, so no locked instruction.
inline uint64_t bump(std::atomic<uint64_t>& c) {
  uint64_t v = c.load(std::memory_order_relaxed) + 1;
  c.store(v, std::memory_order_relaxed);
  return v;
}

struct Slot {
  uint32_t sig = 0;                 // id in the TraceStore
  std::vector<RangeTarget> ranges;  // integer tensor inputs (owner thread only)
  Counters counters;
};

class SignatureTable {
 public:
  static constexpr size_t kChunk = 256;
  static constexpr size_t kMaxChunks = 1024;

  SignatureTable();

  std::atomic<uint64_t> calls{0};  // calls counted in this table (owner thread writes; bump())

  // The slot whose key equals `key`, or null.
  Slot* find(const KeyWords& key, uint64_t hash) const;
  // Adds a slot for `key`; null when the table is full.
  Slot* insert(const KeyWords& key, uint64_t hash, uint32_t sig, std::vector<RangeTarget> ranges);

  // Reader side, from any thread: slots [0, published()) are fully constructed.
  size_t published() const { return size_.load(std::memory_order_acquire); }
  const Slot& slot(size_t i) const { return chunks_[i / kChunk][i % kChunk]; }

 private:
  struct IndexEntry {
    uint64_t hash = 0;
    uint32_t slot = UINT32_MAX;  // UINT32_MAX: empty
    uint32_t key_len = 0;
    size_t key_off = 0;
  };
  bool key_equals(const IndexEntry& e, const KeyWords& key) const;
  void grow_index();

  std::vector<IndexEntry> index_;  // open addressing, linear probing, power-of-two size
  std::vector<uint64_t> keys_;     // all keys back to back
  std::array<std::unique_ptr<Slot[]>, kMaxChunks> chunks_;
  std::atomic<size_t> size_{0};
};

}  // namespace bb::tracer
