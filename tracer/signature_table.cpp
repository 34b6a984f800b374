#include "tracer/signature_table.h"

#include <cstring>

namespace bb::tracer {

SignatureTable::SignatureTable() : index_(64) {}

bool SignatureTable::key_equals(const IndexEntry& e, const KeyWords& key) const {
  return e.key_len == key.size() &&
         std::memcmp(keys_.data() + e.key_off, key.data(), key.size() * sizeof(uint64_t)) == 0;
}

Slot* SignatureTable::find(const KeyWords& key, uint64_t hash) const {
  const size_t mask = index_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const IndexEntry& e = index_[i];
    if (e.slot == UINT32_MAX) return nullptr;
    if (e.hash == hash && key_equals(e, key)) {
      return const_cast<Slot*>(&slot(e.slot));
    }
  }
}

void SignatureTable::grow_index() {
  std::vector<IndexEntry> old(index_.size() * 2);
  old.swap(index_);
  const size_t mask = index_.size() - 1;
  for (const IndexEntry& e : old) {
    if (e.slot == UINT32_MAX) continue;
    size_t i = e.hash & mask;
    while (index_[i].slot != UINT32_MAX) i = (i + 1) & mask;
    index_[i] = e;
  }
}

Slot* SignatureTable::insert(const KeyWords& key, uint64_t hash, uint32_t sig, std::vector<RangeTarget> ranges) {
  const size_t n = size_.load(std::memory_order_relaxed);
  if (n >= kChunk * kMaxChunks) return nullptr;
  if (!chunks_[n / kChunk]) chunks_[n / kChunk].reset(new Slot[kChunk]);
  Slot& s = chunks_[n / kChunk][n % kChunk];
  s.sig = sig;
  s.ranges = std::move(ranges);
  size_.store(n + 1, std::memory_order_release);

  if ((n + 1) * 2 > index_.size()) grow_index();
  const size_t mask = index_.size() - 1;
  size_t i = hash & mask;
  while (index_[i].slot != UINT32_MAX) i = (i + 1) & mask;
  index_[i] = IndexEntry{hash, static_cast<uint32_t>(n), static_cast<uint32_t>(key.size()), keys_.size()};
  keys_.insert(keys_.end(), key.begin(), key.end());
  return &s;
}

}  // namespace bb::tracer
