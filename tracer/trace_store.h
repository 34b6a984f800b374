// The process-wide store behind the tracer: ops, distinct signatures with their arguments, and the
// per-thread tables whose counters it sums when a trace is written.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

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
  std::string name;         // aten::add.Tensor
  std::string schema_name;  // aten::add: checked on every cache hit
  std::optional<c10::FunctionSchema> schema;
  std::vector<bool> writes;  // per argument: the schema lets the op write it
  // The autocast keys (AutocastCPU, AutocastCUDA, ...) this op has a kernel of its own for. Such a
  // kernel casts the arguments and calls the op again; observer.cpp traces only that inner call.
  c10::DispatchKeySet autocast_keys;
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

// Told about each device (cuda:0, ...) the first time any signature uses it. Called without the
// store's lock held.
using DeviceListener = void (*)(const std::string& device);
void set_device_listener(DeviceListener listener);

class TraceStore {
 public:
  explicit TraceStore(size_t max_signatures) : max_signatures_(max_signatures) {}

  // The op a RecordFunction stands for; null for records that are not ATen ops (named ranges).
  const OpInfo* intern_op(const at::RecordFunction& fn);

  struct Interned {
    uint32_t sig;
    std::vector<RangeTarget> ranges;
  };
  // Registers a signature seen for the first time by some thread (slow path). nullopt when the
  // signature limit is reached.
  std::optional<Interned> intern_signature(const KeyWords& key, const OpInfo& op,
                                           c10::ArrayRef<const c10::IValue> args);

  void merge_range(uint32_t sig, RangeTarget where, IntRange range);
  void add_untraced(uint64_t n = 1);

  void attach(const SignatureTable* table);
  // Folds a finishing thread's counters into the store; the table may be freed afterwards.
  void detach(const SignatureTable* table);

  // sampled_scale: what one call seen while tracing was sampled stands for; each such entry's counts
  // are then extrapolated and `seen` says how many calls were seen.
  Snapshot snapshot(double sampled_scale = 1.0) const;

  // Calls counted, and distinct signatures not counting those that differ only in float scalars'
  // values (trace::similar_key()) since count_similar(), so far: sampled tracing's stability test.
  struct Progress {
    uint64_t calls = 0, signatures = 0;
  };
  Progress progress() const;
  // From now on, keep the similar keys of new signatures: they cost memory and a string per new
  // signature, so only sampled tracing and first-calls device timing ask.
  void count_similar() {
    std::lock_guard<std::mutex> lock(mu_);
    count_similar_ = true;
  }
  // True when `sig`, new since count_similar(), differs from an earlier signature only in float
  // scalars' values (AdamW's step-dependent step size makes one of those every step): first-calls
  // device timing does not open a window for such a signature's first sight.
  bool float_variant(uint32_t sig) const;

 private:
  // A signature's counters as plain sums (Counters, signature_table.h).
  struct Tally {
    uint64_t count = 0, nested = 0, with_children = 0, routed = 0;
    uint64_t sampled_count = 0, sampled_nested = 0, sampled_with_children = 0;
    void add(const Counters& c);
  };
  struct Record {
    const OpInfo* op;
    std::vector<trace::ArgValue> args;
    Tally finished;              // from threads that ended
    bool float_variant = false;  // see float_variant()
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
  uint64_t finished_calls_ = 0;  // calls of threads that ended
  bool count_similar_ = false;
  // trace::similar_key() of each signature since count_similar(): the first signature with that key.
  std::unordered_map<std::string, uint32_t> similar_;
};

}  // namespace bb::tracer
