#include "tracer/observer.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "tracer/devtime/collector.h"
#include "tracer/log.h"
#include "tracer/process_state.h"
#include "tracer/quiet_thread.h"
#include "tracer/trace_sampling.h"

namespace bb::tracer {
namespace {

constexpr size_t kMaxFrames = 256;
constexpr size_t kOpCacheInitial = 256;  // power of two; doubles at half full

// The tracer's process state: the store calls are counted in, the callbacks registered with PyTorch,
// what other parts hook into each call, the op lookup's shared knowledge and sampled tracing. From
// the library's load to the process's end (process_state.h: the per-op callback reads it with no
// guard and no indirection; threads still trace while static destructors run). Reached through
// context() only; start_tracing fills it in, once.
struct TracerContext {
  // Read by every call.
  std::atomic<uint32_t> generation{1};  // bumped by a fork: the threads' states from before are dropped
  std::atomic<void (*)()> next_op_task{nullptr};
  // Sampled tracing is on: the calls seen are counted as sampled too (each stands for N calls).
  std::atomic<bool> sampling{false};
  std::atomic<OpStartHook> start_hook{nullptr};  // set_op_hooks
  std::atomic<OpEndHook> end_hook{nullptr};
  std::atomic<void*> hook_context{nullptr};
  std::atomic<DeviceRangeProbe> probe{nullptr};
  std::atomic<DeviceListener> device_listener{nullptr};  // on a signature's slow path only
  // The op lookup (lookup_op): named ranges' overload name (learn_named_overload), and a count of
  // operators removed (OpsRemoved).
  std::atomic<const char*> named_overload{nullptr};
  std::atomic<const char*> named_candidate{nullptr};
  std::atomic<uint64_t> ops_epoch{0};

  std::atomic<TraceStore*> store{nullptr};  // never freed: threads may use it at exit
  TracerOptions options;                    // as start_tracing was given them
  at::CallbackHandle handle = 0;            // the callback that sees every call
  at::CallbackHandle sampled_handle = 0;    // sampled tracing: the same callback, for one call in N

  // Sampled tracing's thread, on a cache line of its own (it takes the lock every few milliseconds).
  alignas(64) std::mutex sampler_mu;
  TraceSampler* sampler = nullptr;  // sampler_mu; never freed: the writer may ask at exit
  bool sampler_stopped = false;     // sampler_mu: at exit, before torch's callback registry is destroyed
};

inline TracerContext& context() { return process_state<TracerContext>(); }

struct Frame {
  const at::RecordFunction* fn;
  Slot* slot;      // null for untraced calls and for records that are not ops
  int prev_op;     // innermost op frame when this one was pushed, -1 if none
  bool had_child;  // an op ran inside this one
  bool hooked;     // the start hook returned true: the end hook is owed
  bool sampled;    // seen while tracing was sampled
};

// A thread's ops by the addresses of their name and overload name, which stay put while the op is
// registered (open addressing, linear probing). An op registered after another was removed may reuse
// its addresses: every removal empties the caches (TracerContext::ops_epoch).
struct OpCacheEntry {
  const char* name = nullptr;  // null: empty
  const char* overload = nullptr;
  const OpInfo* op = nullptr;
};

struct ThreadState {
  ThreadState(TraceStore* s, uint32_t g) : store(s), generation(g) {}
  TraceStore* store;
  uint32_t generation;
  SignatureTable table;
  KeyWords key;
  KeyWords blind;  // the key with float values as 0, on the slow path only
  std::array<Frame, kMaxFrames> frames;
  size_t depth = 0;
  size_t overflow = 0;  // calls nested deeper than kMaxFrames
  int cur_op = -1;
  std::vector<OpCacheEntry> ops = std::vector<OpCacheEntry>(kOpCacheInitial);
  size_t ops_used = 0;
  uint64_t ops_epoch = 0;
};

thread_local ThreadState* t_state = nullptr;
thread_local bool t_finished = false;

// Owns the thread's state; its destructor folds the counts into the store when the thread ends.
struct ThreadStateOwner {
  ThreadState* state = nullptr;
  ~ThreadStateOwner() {
    t_finished = true;
    t_state = nullptr;
    if (!state) return;
    if (state->generation == context().generation.load()) state->store->detach(&state->table);
    delete state;
  }
};
thread_local ThreadStateOwner t_owner;

ThreadState* make_state() {
  if (t_finished) return nullptr;
  TraceStore* store = context().store.load(std::memory_order_acquire);
  if (!store) return nullptr;
  // A state from before a fork belongs to the parent's store: drop it without touching that store.
  delete t_owner.state;
  auto* s = new ThreadState(store, context().generation.load());
  store->attach(&s->table);
  t_owner.state = s;
  t_state = s;
  return s;
}

inline ThreadState* state_for_thread() {
  ThreadState* s = t_state;
  if (C10_LIKELY(s && s->generation == context().generation.load(std::memory_order_relaxed))) return s;
  return make_state();
}

// Named ranges (RECORD_FUNCTION with a string, such as autograd's "autograd::engine::evaluate_function:
// MulBackward0", one per backward node) are not ops. RecordFunction gives every one of them the same
// literal "" as overload name, an address no op's schema string can have (those live in the schema).
// Once two named ranges have shown the same address, a record with it is known to be no op without
// the store's lock (before, each named range took it, and so did the old op cache's collisions:
// about a tenth of all calls on a small Llama's training step). The address: TracerContext's
// named_overload, once named_candidate has seen it twice.

void learn_named_overload(const char* overload) {
  if (*overload != '\0') return;
  const char* seen = context().named_candidate.exchange(overload, std::memory_order_relaxed);
  if (seen == overload) context().named_overload.store(overload, std::memory_order_relaxed);
}

// TracerContext's ops_epoch is bumped whenever an operator is removed from the dispatcher (a
// torch.library going away): the threads' op caches are emptied before their next lookup.
class OpsRemoved final : public c10::OpRegistrationListener {
 public:
  void onOperatorRegistered(const c10::OperatorHandle&) override {}
  void onOperatorDeregistered(const c10::OperatorHandle&) override { context().ops_epoch.fetch_add(1); }
};

size_t op_slot(const char* name, size_t mask) {
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(name) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

// Into the first free slot from its own (the table always has free ones).
void place(std::vector<OpCacheEntry>& ops, const OpCacheEntry& e) {
  const size_t mask = ops.size() - 1;
  size_t i = op_slot(e.name, mask);
  while (ops[i].name) i = (i + 1) & mask;
  ops[i] = e;
}

void cache_op(ThreadState& s, const char* name, const char* overload, const OpInfo* op) {
  if ((s.ops_used + 1) * 2 > s.ops.size()) {
    std::vector<OpCacheEntry> old(s.ops.size() * 2);
    old.swap(s.ops);
    for (const OpCacheEntry& e : old)
      if (e.name) place(s.ops, e);
  }
  place(s.ops, {name, overload, op});
  ++s.ops_used;
}

const OpInfo* lookup_op(ThreadState& s, const at::RecordFunction& fn) {
  const char* name = fn.name();
  const char* overload = fn.overload_name();
  if (overload == context().named_overload.load(std::memory_order_relaxed)) return nullptr;
  if (const uint64_t epoch = context().ops_epoch.load(std::memory_order_acquire); C10_UNLIKELY(epoch != s.ops_epoch)) {
    std::fill(s.ops.begin(), s.ops.end(), OpCacheEntry{});
    s.ops_used = 0;
    s.ops_epoch = epoch;
  }
  const size_t mask = s.ops.size() - 1;
  for (size_t i = op_slot(name, mask); s.ops[i].name; i = (i + 1) & mask)
    if (s.ops[i].name == name && s.ops[i].overload == overload) return s.ops[i].op;
  const OpInfo* op = s.store->intern_op(fn);
  if (op) {
    cache_op(s, name, overload, op);
  } else {
    learn_named_overload(overload);
  }
  return op;
}

const at::Tensor* tensor_at(c10::ArrayRef<const c10::IValue> inputs, RangeTarget where) {
  if (where.arg >= inputs.size()) return nullptr;
  const c10::IValue& v = inputs[where.arg];
  if (v.isTensor()) return &v.toTensor();
  if (v.isList()) {  // Tensor[] and Tensor?[] are both lists of IValues underneath
    auto list = v.toListRef();
    if (where.elem < list.size() && list[where.elem].isTensor()) return &list[where.elem].toTensor();
  }
  return nullptr;
}

void sample_ranges(ThreadState& s, const Slot& slot, c10::ArrayRef<const c10::IValue> inputs) {
  for (RangeTarget where : slot.ranges) {
    const at::Tensor* t = tensor_at(inputs, where);
    if (!t) continue;
    if (t->is_cpu()) {
      if (auto r = cpu_int_range(*t)) s.store->merge_range(slot.sig, where, *r);
    } else if (DeviceRangeProbe probe = context().probe.load(std::memory_order_relaxed)) {
      probe(s.store, slot.sig, where, *t);
    }
  }
}

// The blind key (float values as 0) of this call, marked apart from every exact key.
constexpr uint64_t kBlindKey = uint64_t{1} << 63;
void blind_key(ThreadState& s, const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs) {
  s.blind.clear();
  s.blind.push_back(op.id | kBlindKey);
  for (const auto& v : inputs) encode_key(v, s.blind, true);
}

Slot* find_or_add(ThreadState& s, const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs) {
  s.key.clear();
  s.key.push_back(op.id);
  for (const auto& v : inputs) encode_key(v, s.key);
  const uint64_t h = hash_key(s.key.data(), s.key.size());
  if (Slot* slot = s.table.find(s.key, h)) return slot;
  // New to this thread. Past kMaxFloatVariants float variants of a signature, later ones are counted
  // under its first by their blind key, which this thread may know already.
  blind_key(s, op, inputs);
  const uint64_t hb = hash_key(s.blind.data(), s.blind.size());
  if (op.merges_floats.load(std::memory_order_relaxed))
    if (Slot* slot = s.table.find(s.blind, hb)) return slot;
  auto interned = s.store->intern_signature(s.key, s.blind, op, inputs);
  if (!interned) return nullptr;
  if (DeviceListener listen = context().device_listener.load())
    for (const auto& d : interned->new_devices) listen(d);
  if (interned->merged) return s.table.insert(s.blind, hb, interned->sig, std::move(interned->ranges));
  return s.table.insert(s.key, h, interned->sig, std::move(interned->ranges));
}

// Autocast takes this call: autocast is on for a device of the call's tensors and the op has an
// autocast kernel there, which casts the arguments and calls the op again. That inner call is the one
// that runs (and the one a routed kernel receives); the outer one is not traced, like a named range
// (tracing both counted the call twice, or once more with dtypes that never reach a kernel).
bool taken_by_autocast(const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs) {
  const c10::DispatchKeySet on = op.autocast_keys - c10::impl::tls_local_dispatch_key_set().excluded_;
  if (on.empty()) return false;
  c10::DispatchKeySet keys;
  auto add = [&keys](const c10::IValue& v) {
    if (v.isTensor()) keys = keys | v.toTensor().key_set();
  };
  for (const auto& v : inputs) {
    if (v.isList()) {  // Tensor[] and Tensor?[]
      for (const auto& e : v.toListRef()) add(e);
    } else {
      add(v);
    }
  }
  return !(keys & on).empty();
}

void enter(ThreadState& s, const at::RecordFunction& fn) {
  if (s.depth == kMaxFrames) {
    ++s.overflow;
    return;
  }
  const bool sampled = context().sampling.load(std::memory_order_relaxed);
  const int index = static_cast<int>(s.depth++);
  Frame& f = s.frames[index];
  f = Frame{&fn, nullptr, s.cur_op, false, false, sampled};
  const OpInfo* op = lookup_op(s, fn);
  if (!op) return;
  auto inputs = fn.inputs();
  if (inputs.size() > op->nargs()) inputs = inputs.slice(inputs.size() - op->nargs());
  if (C10_UNLIKELY(!op->autocast_keys.empty()) && taken_by_autocast(*op, inputs)) return;

  const bool nested = s.cur_op >= 0;
  if (nested) s.frames[s.cur_op].had_child = true;
  s.cur_op = index;
  Slot* slot = find_or_add(s, *op, inputs);
  if (OpStartHook hook = context().start_hook.load(std::memory_order_relaxed))
    f.hooked =
        hook(context().hook_context.load(std::memory_order_relaxed), slot ? slot->sig : devtime::kNoSignature, sampled);
  if (!slot) {
    s.store->add_untraced();
    return;
  }
  f.slot = slot;
  bump(s.table.calls);
  const uint64_t n = bump(slot->counters.count);
  if (nested) bump(slot->counters.nested);
  if (C10_UNLIKELY(sampled)) {
    bump(slot->counters.sampled_count);
    if (nested) bump(slot->counters.sampled_nested);
  }
  if (!slot->ranges.empty() && context().options.int_ranges && (n & (n - 1)) == 0) sample_ranges(s, *slot, inputs);
}

void leave(ThreadState& s, const at::RecordFunction& fn) {
  if (s.overflow) {
    --s.overflow;
    return;
  }
  // Normally the top frame; tolerate a record that ends out of order by unwinding to it.
  size_t i = s.depth;
  while (i > 0 && s.frames[i - 1].fn != &fn) --i;
  if (i == 0) return;
  if (OpEndHook hook = context().end_hook.load(std::memory_order_relaxed)) {
    void* hook_context = context().hook_context.load(std::memory_order_relaxed);
    for (size_t j = s.depth; j >= i; --j)  // this frame and any left open above it
      if (s.frames[j - 1].hooked) hook(hook_context);
  }
  const Frame& f = s.frames[i - 1];
  if (f.slot && f.had_child) {
    bump(f.slot->counters.with_children);
    if (f.sampled) bump(f.slot->counters.sampled_with_children);
  }
  s.cur_op = f.prev_op;
  s.depth = i - 1;
}

void report(const char* where) {
  log::warn_once(std::string("tracer:") + where, std::string("internal error in the tracer (") + where +
                                                     "); the call was not recorded and the program continues");
  if (log::enabled(log::Level::Debug)) log::debug(std::string("internal error at:\n") + log::stacktrace());
}

void run_next_op_task() {
  if (auto task = context().next_op_task.exchange(nullptr)) task();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (C10_UNLIKELY(context().next_op_task.load(std::memory_order_relaxed) != nullptr)) run_next_op_task();
  ThreadState* s = state_for_thread();
  if (!s) return nullptr;
  try {
    enter(*s, fn);
  } catch (...) {
    report("op start");
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  ThreadState* s = t_state;
  if (!s || s->generation != context().generation.load(std::memory_order_relaxed)) return;
  try {
    leave(*s, fn);
  } catch (...) {
    report("op end");
  }
}

}  // namespace

TraceStore* start_tracing(const TracerOptions& options) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  TracerContext& c = context();
  if (TraceStore* running = c.store.load()) return running;
  c.options = options;
  auto* store = new TraceStore(options.max_signatures);
  c.store.store(store, std::memory_order_release);
  // Never released: the dispatcher may be gone before this library's destructors run.
  auto& dispatcher = c10::Dispatcher::singleton();
  new c10::RegistrationHandleRAII(dispatcher.addRegistrationListener(std::make_unique<OpsRemoved>()));
  c.handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_start, &on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  return store;
}

namespace {

// Traces one call in N (sample) or every call; sampler_mu held. Off first, then on: for a moment
// neither callback runs, rather than both seeing one call.
void use_sampled_callback(bool sample) {
  TracerContext& c = context();
  at::disableCallback(sample ? c.handle : c.sampled_handle);
  c.sampling.store(sample, std::memory_order_relaxed);
  at::reenableCallback(sample ? c.sampled_handle : c.handle);
}

// The sampler's thread: asks TraceSampler whether to sample and swaps the callbacks (each thread
// sees the change at its next op), until the store changes (fork) or the process exits.
void run_sampler(TraceStore* store, TraceSampler* sampler, bool (*hold)()) {
  TracerContext& c = context();
  bool sampling = false;
  for (;;) {
    if (c.store.load() != store) return;
    const auto now = TraceSampler::clock::now();
    const bool held = hold && hold();
    const TraceStore::Progress p = store->progress();
    {
      std::lock_guard<std::mutex> lock(c.sampler_mu);
      if (c.sampler_stopped) return;
      const bool sample = sampler->step(now, p.calls, p.signatures, held);
      if (sample != sampling) {
        use_sampled_callback(sample);
        sampling = sample;
      }
    }
    std::this_thread::sleep_for(TraceSampler::kPoll);
  }
}

// The sampler's thread ended on an exception (a bug of ours; escaping the thread would end the
// program): every call is traced again from here, and that is said.
void sampler_failed(const std::string& what) {
  std::lock_guard<std::mutex> lock(context().sampler_mu);
  if (context().sampler_stopped) return;
  use_sampled_callback(false);
  log::warn("sampled tracing stopped: internal error (" + what + "); every call is traced from here");
}

}  // namespace

bool start_trace_sampling(const TraceSamplingOptions& options, bool (*hold)()) {
  TracerContext& c = context();
  TraceStore* store = c.store.load();
  if (!store || !c.handle || !options.enabled()) return false;
  std::lock_guard<std::mutex> lock(c.sampler_mu);
  if (c.sampler) return false;
  c.sampled_handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                               .needsInputs(true)
                                               .samplingProb(1.0 / options.every)
                                               .scopes({at::RecordScope::FUNCTION}));
  at::disableCallback(c.sampled_handle);
  c.sampler = new TraceSampler(options, TraceSampler::clock::now());
  TraceSampler* sampler = c.sampler;
  // Runs before the static destructors of what existed before it (torch's callback registry among
  // them): the thread switches nothing after.
  std::atexit([] {
    std::lock_guard<std::mutex> lock(context().sampler_mu);
    context().sampler_stopped = true;
  });
  return start_quiet_thread([store, sampler, hold] { run_sampler(store, sampler, hold); }, &sampler_failed,
                            "sampled tracing", "every call is traced");
}

std::optional<SampledTracing> sampled_tracing() {
  TracerContext& c = context();
  std::lock_guard<std::mutex> lock(c.sampler_mu);
  if (!c.sampler) return std::nullopt;
  return SampledTracing{c.sampler->report(), static_cast<double>(c.sampler->options().every)};
}

void reset_after_fork(bool keep_tracing) {
  TracerContext& c = context();
  c.store.store(keep_tracing ? new TraceStore(c.options.max_signatures) : nullptr);
  c.generation.fetch_add(1);
}

void set_device_range_probe(DeviceRangeProbe probe) { context().probe.store(probe); }

void set_device_listener(DeviceListener listener) { context().device_listener.store(listener); }

void set_op_hooks(OpStartHook start, OpEndHook end, void* hook_context) {
  context().hook_context.store(hook_context);
  context().end_hook.store(end);
  context().start_hook.store(start);
}

bool inside_traced_op() noexcept {
  if (context().sampling.load(std::memory_order_relaxed)) return true;  // in a call the tracer did not see, maybe
  const ThreadState* s = t_state;
  return s && s->cur_op >= 0;
}

bool float_variant(uint32_t sig) {
  TraceStore* store = context().store.load();
  return store && store->float_variant(sig);
}

std::string describe_signature(uint32_t sig) {
  TraceStore* store = context().store.load();
  return store ? store->describe(sig) : "signature " + std::to_string(sig);
}

void run_on_next_op(void (*task)()) { context().next_op_task.store(task); }

void mark_routed() {
  ThreadState* s = t_state;
  if (!s || s->generation != context().generation.load(std::memory_order_relaxed) || s->cur_op < 0) return;
  if (Slot* slot = s->frames[s->cur_op].slot) bump(slot->counters.routed);
}

}  // namespace bb::tracer
