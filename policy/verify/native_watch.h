// The native-call watch: which ATen compute ops a kernel under test handed its work to. One
// implementation for the preload (route and shadow modes) and bbreplay (every call of a kernel: its
// checks, its warm-ups and its timed runs).
#pragma once

#include <ATen/record_function.h>

#include <string>
#include <vector>

#include "backends/op_kinds.h"

namespace bb::verify {

// While alive, notes the ATen ops this thread calls (through the dispatcher). Nested watches share
// the outermost one's callback; each reports only what was called while it was the innermost. The
// callback does no more than compare two pointers on a repeated plumbing op (allocations in a loop),
// so that a watched call costs what an unwatched one does to within the dispatcher's own
// RecordFunction cost per ATen op the kernel itself calls (bench/watch_overhead.cpp measures it).
class NativeCallWatch {
 public:
  // `kernel_op`: the overload the watched kernel implements (aten::relu), kept by reference (it must
  // outlive the watch): calling it, or an op doing the same work, is a native call even where that op
  // is otherwise plumbing (docs/integrity.md). Only the outermost watch of a thread adds the callback:
  // a watch made inside another costs a few pointer moves (bbreplay keeps one around each timed run,
  // made before its clock starts).
  // `allow` (kept by pointer; null: none): compute ops the policy lets the kernel call, noted in
  // allowed() instead (backends::is_allowed_for). What an allowed op calls inside is its own business,
  // except the kernel's own op or an op doing its work: those are native calls wherever they happen.
  explicit NativeCallWatch(const std::string& kernel_op, const backends::AtenAllowance* allow = nullptr);
  ~NativeCallWatch();
  NativeCallWatch(const NativeCallWatch&) = delete;
  NativeCallWatch& operator=(const NativeCallWatch&) = delete;

  // The first compute op called while this watch was the innermost ("aten::relu"), or "".
  const std::string& first() const { return first_; }
  // The distinct compute ops called while this watch was the innermost that `allow` let through (at
  // most kMaxAllowed of them, in the order first seen).
  const std::vector<std::string>& allowed() const { return allowed_; }
  static constexpr size_t kMaxAllowed = 8;

 private:
  friend std::unique_ptr<at::ObserverContext> note_native_call(const at::RecordFunction& fn);
  friend struct InsideAllowed;
  const std::string& kernel_op_;
  const backends::AtenAllowance* allow_;
  std::string first_;
  std::vector<std::string> allowed_;
  int inside_allowed_ = 0;  // allowed ops running on this thread (their internals are theirs, not the kernel's)
  const char* last_name_ = nullptr;  // the last plumbing op seen (name and overload pointers)
  const char* last_overload_ = nullptr;
  NativeCallWatch* outer_;
  bool owns_callback_;
  at::CallbackHandle handle_ = 0;
};

}  // namespace bb::verify
