// The process-wide store behind the tracer: ops, distinct signatures with their arguments, and the
// per-thread tables whose counters it sums when a trace is written.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracer/arg_key.h"
#include "tracer/int_range.h"
#include "tracer/signature_table.h"
#include "tracer/format/trace_model.h"

namespace bb::tracer {

struct OpInfo {
  uint32_t id = 0;
  std::string name;  // aten::add.Tensor
  std::optional<c10::FunctionSchema> schema;
  std::vector<bool> writes;  // per argument: the schema lets the op write it
  // The autocast keys (AutocastCPU, AutocastCUDA, ...) this op has a kernel of its own for. Such a
  // kernel casts the arguments and calls the op again; observer.cpp traces only that inner call.
  c10::DispatchKeySet autocast_keys;
  // Some signature of this op has had kMaxFloatVariants variants (TraceStore): a call whose exact key
  // is new to its thread looks for its float-blind key too (observer.cpp).
  mutable std::atomic<bool> merges_floats{false};
  size_t nargs() const { return writes.size(); }
};

struct Snapshot {
  std::vector<trace::TraceEntry> entries;  // sorted by op name, then first sighting
  std::vector<uint32_t> sigs;              // the signature index of each entry
  std::vector<std::string> devices;        // non-CPU devices seen in any signature
  uint64_t calls = 0;                      // with the calls extrapolated from sampled tracing
  uint64_t calls_seen = 0;                 // calls the tracer saw
  uint64_t untraced_calls = 0;
};

class TraceStore {
 public:
  explicit TraceStore(size_t max_signatures) : max_signatures_(max_signatures) {}

  // The op a RecordFunction stands for; null for records that are not ATen ops (named ranges).
  const OpInfo* intern_op(const at::RecordFunction& fn);

  struct Interned {
    uint32_t sig;
    std::vector<RangeTarget> ranges;
    bool merged = false;                   // counted under its first float variant: the thread keys it by the blind key
    std::vector<std::string> new_devices;  // devices (cuda:0, ...) no signature used before this one
  };
  // A signature's float variants — equal to it but for the values of float scalars — are kept as
  // signatures of their own up to this many; later ones are counted under the first (whose entry then
  // says floats_merged). A step-dependent scalar (AdamW's step size, a learning-rate schedule) makes
  // a new one every step; keeping them all grew the store, the trace and the writes without bound.
  // Few: from then on the first repeats every step and first-calls device timing can time it (with 16
  // kept, it repeated only from the 17th step, too late for a 20-step run; performance.md).
  static constexpr uint32_t kMaxFloatVariants = 4;
  // Registers a signature seen for the first time by some thread (slow path); blind is its key with
  // float values as 0 (encode_key's blind_floats). nullopt when the signature limit is reached.
  std::optional<Interned> intern_signature(const KeyWords& key, const KeyWords& blind, const OpInfo& op,
                                           c10::ArrayRef<const c10::IValue> args);

  void merge_range(uint32_t sig, RangeTarget where, IntRange range);
  void add_untraced(uint64_t n = 1);

  void attach(const SignatureTable* table);
  // Folds a finishing thread's counters into the store; the table may be freed afterwards.
  void detach(const SignatureTable* table);

  // sampled_scale: what one call seen while tracing was sampled stands for; each such entry's counts
  // are then extrapolated and `seen` says how many calls were seen.
  Snapshot snapshot(double sampled_scale = 1.0) const;

  // Calls counted, and distinct signatures not counting float variants, so far: sampled tracing's
  // stability test.
  struct Progress {
    uint64_t calls = 0, signatures = 0;
  };
  Progress progress() const;
  // True when `sig` differs from an earlier signature only in float scalars' values (AdamW's
  // step-dependent step size makes one of those every step): first-calls device timing does not open
  // a window for such a signature's first sight.
  bool float_variant(uint32_t sig) const;
  // `sig` in a line, for messages: "aten::mm(bfloat16[512,64]@cuda:0, bfloat16[64,512]@cuda:0)", as
  // bbtrace summary writes signatures (trace::args_text); cut at about 200 characters.
  std::string describe(uint32_t sig) const;

 private:
  // A signature's counters as plain sums (Counters, signature_table.h).
  struct Tally {
    uint64_t count = 0, nested = 0, with_children = 0, routed = 0;
    uint64_t sampled_count = 0, sampled_nested = 0, sampled_with_children = 0;
    void add(const Counters& c);
  };
  struct Record {
    const OpInfo* op = nullptr;
    std::vector<trace::ArgValue> args;
    Tally finished;              // from threads that ended
    bool float_variant = false;  // see float_variant()
    bool floats_merged = false;  // later float variants are counted here
  };
  struct FloatVariants {  // the signatures equal but for float values
    uint32_t first = 0;
    uint32_t count = 0;
  };
  struct KeyHash {
    size_t operator()(const KeyWords& k) const { return hash_key(k.data(), k.size()); }
  };
  trace::TensorMeta* tensor_at(Record& r, RangeTarget where);

  mutable std::mutex mu_;
  const size_t max_signatures_;
  std::map<std::string, std::unique_ptr<OpInfo>> ops_;
  std::unordered_map<KeyWords, uint32_t, KeyHash> signatures_;
  std::vector<Record> records_;
  std::set<std::string> devices_;
  std::set<const SignatureTable*> tables_;
  uint64_t untraced_ = 0;
  uint64_t finished_calls_ = 0;                                    // calls of threads that ended
  std::unordered_map<KeyWords, FloatVariants, KeyHash> variants_;  // by blind key
};

}  // namespace bb::tracer
