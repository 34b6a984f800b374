#include "tracer/trace_store.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "tracer/format/op_name.h"
#include "tracer/format/trace_summary.h"

namespace bb::tracer {
namespace {

bool rangeable(const at::Tensor& t) { return is_plain_dense(t) && wants_range(t.scalar_type()); }

// Integer tensors among the arguments that the op only reads.
std::vector<RangeTarget> range_targets(const OpInfo& op, c10::ArrayRef<const c10::IValue> args) {
  std::vector<RangeTarget> out;
  for (size_t i = 0; i < args.size() && i < 0xffff; ++i) {
    if (i < op.writes.size() && op.writes[i]) continue;
    const auto& v = args[i];
    if (v.isTensor()) {
      if (rangeable(v.toTensor())) out.push_back({uint16_t(i), 0});
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t k = 0; k < list.size() && k < 0xffff; ++k)
        if (rangeable(list[k])) out.push_back({uint16_t(i), uint16_t(k)});
    } else if (v.isList()) {
      auto list = v.toListRef();
      for (size_t k = 0; k < list.size() && k < 0xffff; ++k)
        if (list[k].isTensor() && rangeable(list[k].toTensor())) out.push_back({uint16_t(i), uint16_t(k)});
    }
  }
  return out;
}

// Adds the non-CPU devices of `args` to `devices`; returns the ones not seen before.
std::vector<std::string> note_devices(const std::vector<trace::ArgValue>& args, std::set<std::string>& devices) {
  std::vector<std::string> added;
  for (const auto& a : args)
    for (const auto& t : a.tensors)
      if (t && t->device != "cpu" && devices.insert(t->device).second) added.push_back(t->device);
  return added;
}

}  // namespace

const OpInfo* TraceStore::intern_op(const at::RecordFunction& fn) {
  const std::string full = trace::join_op(fn.name(), fn.overload_name());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(full);
  if (it != ops_.end()) return it->second.get();
  auto schema = fn.operator_schema();
  if (!schema) {  // a named range (RECORD_FUNCTION with a string), not an op: remember that
    ops_.emplace(full, nullptr);
    return nullptr;
  }
  auto info = std::make_unique<OpInfo>();
  info->id = static_cast<uint32_t>(ops_.size());
  info->name = full;
  for (const auto& a : schema->arguments()) info->writes.push_back(a.alias_info() && a.alias_info()->isWrite());
  if (auto handle = c10::Dispatcher::singleton().findOp(schema->operator_name()))
    for (c10::DispatchKey k : c10::autocast_dispatch_keyset)
      if (handle->hasKernelForDispatchKey(k)) info->autocast_keys = info->autocast_keys.add(k);
  info->schema = std::move(schema);
  return ops_.emplace(full, std::move(info)).first->second.get();
}

std::optional<TraceStore::Interned> TraceStore::intern_signature(const KeyWords& key, const KeyWords& blind,
                                                                 const OpInfo& op,
                                                                 c10::ArrayRef<const c10::IValue> args) {
  std::vector<std::string> new_devices;
  uint32_t sig;
  bool merged = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = signatures_.find(key);
    if (it != signatures_.end()) {
      sig = it->second;
    } else {
      auto found = variants_.find(blind);
      const bool merge = found != variants_.end() && found->second.count >= kMaxFloatVariants;
      // At the limit only a merged variant is counted; a refused signature leaves no variants_ entry.
      if (!merge && records_.size() >= max_signatures_) return std::nullopt;
      FloatVariants& v = found != variants_.end() ? found->second : variants_[blind];
      if (merge) {
        // One more float variant: counted under the first, as every later one will be (the thread
        // keys it by the blind key; no new record, no new key kept here).
        sig = v.first;
        merged = true;
        records_[sig].floats_merged = true;
        op.merges_floats.store(true, std::memory_order_relaxed);
      } else {
        Record r;
        r.op = &op;
        const auto& params = op.schema->arguments();
        for (size_t i = 0; i < args.size(); ++i)
          r.args.push_back(describe_arg(args[i], i < params.size() ? &params[i] : nullptr, i));
        new_devices = note_devices(r.args, devices_);
        sig = static_cast<uint32_t>(records_.size());
        r.float_variant = v.count > 0;
        if (v.count++ == 0) v.first = sig;
        records_.push_back(std::move(r));
        signatures_.emplace(key, sig);
      }
    }
  }
  return Interned{sig, range_targets(op, args), merged, std::move(new_devices)};
}

trace::TensorMeta* TraceStore::tensor_at(Record& r, RangeTarget where) {
  if (where.arg >= r.args.size()) return nullptr;
  auto& ts = r.args[where.arg].tensors;
  if (where.elem >= ts.size() || !ts[where.elem]) return nullptr;
  return &*ts[where.elem];
}

void TraceStore::merge_range(uint32_t sig, RangeTarget where, IntRange range) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sig >= records_.size()) return;
  trace::TensorMeta* t = tensor_at(records_[sig], where);
  if (!t) return;
  if (!t->range) {
    t->range = range;
  } else {
    t->range->first = std::min(t->range->first, range.first);
    t->range->second = std::max(t->range->second, range.second);
  }
}

void TraceStore::add_untraced(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  untraced_ += n;
}

void TraceStore::attach(const SignatureTable* table) {
  std::lock_guard<std::mutex> lock(mu_);
  tables_.insert(table);
}

void TraceStore::Tally::add(const Counters& c) {
  count += c.count.load(std::memory_order_relaxed);
  nested += c.nested.load(std::memory_order_relaxed);
  with_children += c.with_children.load(std::memory_order_relaxed);
  routed += c.routed.load(std::memory_order_relaxed);
  sampled_count += c.sampled_count.load(std::memory_order_relaxed);
  sampled_nested += c.sampled_nested.load(std::memory_order_relaxed);
  sampled_with_children += c.sampled_with_children.load(std::memory_order_relaxed);
}

void TraceStore::detach(const SignatureTable* table) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tables_.erase(table)) return;
  for (size_t i = 0, n = table->published(); i < n; ++i) {
    const Slot& s = table->slot(i);
    records_[s.sig].finished.add(s.counters);
  }
  finished_calls_ += table->calls.load(std::memory_order_relaxed);
}

bool TraceStore::float_variant(uint32_t sig) const {
  std::lock_guard<std::mutex> lock(mu_);
  return sig < records_.size() && records_[sig].float_variant;
}

std::string TraceStore::describe(uint32_t sig) const {
  constexpr size_t kMax = 200;
  std::lock_guard<std::mutex> lock(mu_);
  if (sig >= records_.size() || !records_[sig].op) return "signature " + std::to_string(sig);
  const Record& r = records_[sig];
  const std::string out = r.op->name + "(" + trace::args_text(r.args);
  if (out.size() > kMax) return out.substr(0, kMax) + "...)";
  return out + ")";
}

TraceStore::Progress TraceStore::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  Progress p{finished_calls_, variants_.size()};
  for (const SignatureTable* t : tables_) p.calls += t->calls.load(std::memory_order_relaxed);
  return p;
}

Snapshot TraceStore::snapshot(double sampled_scale) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Tally> by_sig(records_.size());
  for (size_t k = 0; k < records_.size(); ++k) by_sig[k] = records_[k].finished;
  for (const SignatureTable* t : tables_) {
    for (size_t i = 0, n = t->published(); i < n; ++i) {
      const Slot& s = t->slot(i);
      by_sig[s.sig].add(s.counters);
    }
  }
  Snapshot snap;
  std::vector<size_t> order;
  for (size_t k = 0; k < records_.size(); ++k)
    if (by_sig[k].count > 0) order.push_back(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return records_[a].op->name < records_[b].op->name; });
  for (size_t k : order) {
    const Tally& x = by_sig[k];
    trace::TraceEntry e;
    e.op = records_[k].op->name;
    e.args = records_[k].args;
    e.floats_merged = records_[k].floats_merged;
    // Counters are read without stopping their threads: keep them mutually consistent.
    e.count = x.count;
    e.nested = std::min(x.nested, e.count);
    e.with_children = std::min(x.with_children, e.count);
    e.routed = std::min(x.routed, e.count);
    snap.calls_seen += e.count;
    if (x.sampled_count > 0 && sampled_scale > 1.0) {
      // Each call seen while sampling stands for sampled_scale calls; the others were all seen. A call
      // seen while sampling is seen nested only when the call around it was sampled too (one time in
      // sampled_scale), and with children only when one of them was: where the signature has calls
      // traced one by one, their shares of nested and with-children calls stand for the sampled ones;
      // else the share seen among the sampled calls times sampled_scale, at most all of them (for
      // with-children an upper estimate: a call with several children shows one more often).
      const uint64_t sampled = std::min(x.sampled_count, x.count), exact = x.count - sampled;
      const double est = static_cast<double>(sampled) * sampled_scale;
      auto part = [&](uint64_t all, uint64_t of_sampled) {
        of_sampled = std::min(of_sampled, all);
        const uint64_t exact_part = all - of_sampled;
        const double share = exact > 0 ? static_cast<double>(exact_part) / static_cast<double>(exact)
                                       : std::min(1.0, static_cast<double>(of_sampled) * sampled_scale /
                                                           std::max(1.0, static_cast<double>(sampled)));
        return exact_part + static_cast<uint64_t>(std::llround(est * share));
      };
      e.seen = e.count;
      e.count = exact + static_cast<uint64_t>(std::llround(est));
      e.nested = std::min(part(x.nested, x.sampled_nested), e.count);
      e.with_children = std::min(part(x.with_children, x.sampled_with_children), e.count);
    }
    snap.calls += e.count;
    snap.entries.push_back(std::move(e));
    snap.sigs.push_back(static_cast<uint32_t>(k));
  }
  snap.devices.assign(devices_.begin(), devices_.end());
  snap.untraced_calls = untraced_;
  return snap;
}

}  // namespace bb::tracer
