// Call signatures as compact, exact keys (hot path) and as trace arguments (first sighting only).
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::tracer {

// A signature key's words. The hot path appends tens of them per call (a foreach op's tensor lists:
// hundreds): append() makes room for a run of words with one capacity check and leaves them to be
// written through the pointer, where std::vector checks its capacity per word and value-initializes
// on resize.
class KeyWords {
 public:
  KeyWords() = default;
  KeyWords(std::initializer_list<uint64_t> words) { assign(words.begin(), words.size()); }
  KeyWords(const KeyWords& other) { assign(other.data(), other.size_); }
  KeyWords(KeyWords&& other) noexcept
      : words_(std::move(other.words_)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  KeyWords& operator=(KeyWords other) noexcept {
    std::swap(words_, other.words_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }

  const uint64_t* data() const { return words_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint64_t* begin() const { return data(); }
  const uint64_t* end() const { return data() + size_; }

  void clear() { size_ = 0; }
  // Drops the words from `n` on (n <= size()).
  void truncate(size_t n) { size_ = n < size_ ? n : size_; }
  // Room for `n` more words at the end, not initialized: the caller writes all of them.
  uint64_t* append(size_t n) {
    if (capacity_ - size_ < n) grow(n);
    uint64_t* at = words_.get() + size_;
    size_ += n;
    return at;
  }
  void push_back(uint64_t w) { *append(1) = w; }

  friend bool operator==(const KeyWords& a, const KeyWords& b) {
    return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data(), b.data(), a.size_ * sizeof(uint64_t)) == 0);
  }
  friend bool operator!=(const KeyWords& a, const KeyWords& b) { return !(a == b); }

 private:
  void grow(size_t n);
  // Into an empty key, sized exactly: the store keeps a copy of every signature's key.
  void assign(const uint64_t* words, size_t n) {
    if (!n) return;
    words_.reset(new uint64_t[n]);
    std::memcpy(words_.get(), words, n * sizeof(uint64_t));
    size_ = capacity_ = n;
  }

  std::unique_ptr<uint64_t[]> words_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Appends an exact encoding of everything in `v` that defines a call signature: tensor dtype, device,
// layout, shape, stride and storage offset; scalar and list values. Two values with equal encodings
// are the same signature; no hashing is involved in that decision. Never throws. blind_floats: float
// values (also complex, and inside lists) encoded as 0 — the key of a signature's float variants,
// those equal to it but for the values of float scalars.
void encode_key(const c10::IValue& v, KeyWords& out, bool blind_floats = false);

uint64_t hash_key(const uint64_t* words, size_t n);

// Describes one argument for the trace. `schema_arg` gives the name and the declared type, which
// tells dtype/layout/memory-format values apart from plain ints.
trace::ArgValue describe_arg(const c10::IValue& v, const c10::Argument* schema_arg, size_t index);

// The tensor part of describe_arg, for a defined tensor.
trace::TensorMeta describe_tensor(const at::Tensor& t);

}  // namespace bb::tracer
