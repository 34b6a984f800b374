// The kernel worker (replay/cli/kernel_worker.h): the backend loaded, then one request at a time from its
// reference, answered on the same channel. Requests and replies are wire.h messages:
//   bind {op}                      the case's op; its kernel ("problem" when the backend has none)
//   run {id, poison}               the kernel on argument set id (watched, poisoned): results kept under id, and
//                                  described (see describe)
//   ready {id} / go {id, seed}     (host clock) operands evicted; then the timed call: "us" and where its results
//                                  are first, then (asked "more") what else it did
//   timed {id, also}               (CUDA) the call timed by CUPTI, described; "also" ({id, run, results_only}):
//                                  an earlier run described too, as it is after this one (packed after it)
//   describe {id, run, pack,       the arguments and a run's results as metadata (addresses; CUDA: packed into
//             results_only}        the buffer); results_only: the run's results alone
// A request naming an argument set may carry "values" (make the set: its structure and layouts, no data) and
// "fill" (its storages' bytes: in the inbox, a file the reference shares on kInboxFd, or the IPC buffer).
// Any request may carry "free" (argument sets to forget first); every reply but go's first carries
// "spent" (this process's seconds by phase since its last reply, for the report's phases).
//   buffer {handle}                open the reference's IPC buffer
//   case_end                       what the case changed in this process (tamper.h, process state)
//   release                        after a large case: the buffer closed, the allocator's cached memory given back
//   ping                           an answer at once (the reference's measure of the channel's latency)
#include "replay/cli/kernel_worker.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "bb/kernel.h"
#include "policy/policy.h"
#include "policy/verify/native_watch.h"
#include "replay/cli/bbreplay_app.h"
#include "replay/case/cache_evict.h"
#include "replay/case/case_steps.h"
#include "replay/case/inputs.h"
#include "replay/timing/cupti_call_timer.h"
#include "replay/timing/ipc_buffer.h"
#include "replay/workers/memory.h"
#include "replay/case/poison.h"
#include "replay/timing/cuda_red_zones.h"
#include "replay/workers/process_state.h"
#include "replay/case/spent.h"
#include "replay/workers/tamper.h"
#include "replay/workers/wire.h"

namespace bb::replay {
namespace {

using wire::json;

// An argument set, and every run made on it: each run's results stay alive until the set is freed, so
// that a later call's allocations cannot land in them (a buffer reused across calls is the kernel's).
struct ArgSet {
  Values args;
  std::vector<Called> runs;
  bool args_gone = false;  // let go after its timed run was described (let_arguments_go)
};

// After a timed run on the device has been described (packed into the IPC buffer, so that nothing is read
// from them later), nothing but its results is asked of its set again (the reference rereads them and
// releases the set): the arguments that are not among them are given back at once. (Host-timed runs keep
// theirs: the reference reads them from this process's memory after the answer.) Kept until the set was
// released, the 1B trace's _foreach_ cases held a list of every parameter more than they needed in each of
// two sets (the timed run's, and the one before, held for its results), and an H100 ran out of memory
// (2026-12-07). Results that are arguments (in-place ops) stay. Nothing is let go where an argument is
// host memory (a CPU scalar tensor beside device ones): the reference reads that after the answer too.
void let_arguments_go(ArgSet& set) {
  for (const at::Tensor& t : wire::tensors_in(set.args))
    if (t.defined() && t.has_storage() && t.is_cpu()) return;
  set.args = Values();
  set.args_gone = true;
}

// Everything a worker holds, for one process's life.
struct State {
  RunOptions run;
  std::optional<policy::Policy> policy;
  backends::Backend backend;
  bool has_backend = false;
  c10::OperatorHandle op = *c10::Dispatcher::singleton().findSchema({"aten::relu", ""});
  const backends::LoadedKernel* kernel = nullptr;  // null: native runs (the self-check)
  std::map<int64_t, ArgSet> sets;
  IpcBuffer buffer;
  const char* inbox = nullptr;  // the reference's inputs (kInboxFd, mapped read-only)
  uint64_t inbox_bytes = 0;
  CodeImage code;
  SyscallWatch syscalls;
  DispatcherImage dispatcher;
  std::optional<verify::NativeCallWatch> watch;  // around a host-timed call, from its eviction on
  uint64_t cases = 0;
};

int device_index(const c10::Device& d) { return d.has_index() ? d.index() : 0; }

// (below: the values of an argument set after a run, packed into the buffer from byte `base` on, up to `*end`)
json describe(State& s, const json& m, uint64_t base = 0, uint64_t* end = nullptr);

json error(const std::string& why) { return {{"error", why}}; }

ArgSet& set_of(State& s, const json& m) {
  auto it = s.sets.find(m.at("id").get<int64_t>());
  if (it == s.sets.end()) throw std::runtime_error("no argument set " + m.at("id").dump());
  return it->second;
}

// ------------------------------------------------------------------ setting up

std::vector<json> load_findings(State& s, const DispatcherImage& before, const std::string& computed) {
  std::vector<json> out;
  for (const std::string& d : dispatcher_changes(before))
    out.push_back({{"flag", "dispatcher-override"},
                   {"why", "loading the backend registered a kernel over ATen's own: " + d}});
  if (!computed.empty())
    out.push_back({{"flag", "native-call"},
                   {"why", "loading the backend ran ATen's " + computed + " (work done at load time is watched as a "
                                                                          "call)"}});
  (void)s;
  return out;
}

json hello(State& s, const json& m) {
  s.run.device = c10::Device(m.at("device").get<std::string>());
  if (const std::string text = m.value("policy_text", ""); !text.empty())
    s.policy = policy::parse_policy(text, m.value("policy_name", "policy"));
  s.run.policy = s.policy ? &*s.policy : nullptr;
  const std::string dir = m.value("backend", "");
  s.has_backend = !dir.empty();
  if (std::string why = refuse_userfaultfd(); !why.empty())  // (before any code of the backend's runs)
    std::cerr << "bbreplay: userfaultfd is not refused to the kernel's process: " << why << "\n";
  const DispatcherImage before = take_dispatcher_image();
  ProcessState pristine = process_state();
  std::string computed;
  if (s.has_backend) {
    auto tc = backends::make_toolchain(BB_TORCH_LIB_DIR, BB_TORCH_VERSION, app::lib_dir() + "/../include", "");
    tc.python_bridge = app::lib_dir() + "/libbbshim_python.so";
    static const std::string nothing;
    verify::NativeCallWatch watch(nothing);  // (static initializers of the backend's libraries run here)
    const auto built = m.value("built", std::map<std::string, std::string>{});
    s.backend = backends::load_backend(dir, tc, &built);  // (built by the reference: nothing is compiled here)
    computed = watch.first();
  }
  install_poisoning_allocator();
  // (after loading: what the backend allocated for itself at load time has no zones; where the allocator is
  // not the native caching one, CUDA memory has none)
  if (s.run.device.is_cuda()) (void)install_cuda_red_zones();
  // What loading changed in this process's state is set back (the poisoning allocator and the CUDA
  // red zones' are bbreplay's own); then every case is compared with it.
  pristine.cpu_allocator = c10::GetCPUAllocator();
  pristine.cuda_allocator = cuda_allocator();
  (void)restore_process_state(pristine);
  keep_process_baseline();
  json report = {{"load", load_findings(s, before, computed)}, {"problems", s.backend.problems}};
  json kernels = json::array(), unusable = json::object();
  for (const auto& k : s.backend.kernels) kernels.push_back(k.op);
  for (const auto& [op, why] : s.backend.unusable) unusable[op] = why;
  report["kernels"] = kernels;
  report["unusable"] = unusable;
  report["pid"] = ::getpid();
  s.code = take_code_image();
  s.syscalls = syscall_watch();
  s.dispatcher = take_dispatcher_image();
  if (!s.code.error.empty()) report["code_image"] = s.code.error;
  return report;
}

// ------------------------------------------------------------------ requests

json bind(State& s, const json& m) {
  const std::string name = m.at("op");
  auto [base, overload] = std::pair<std::string, std::string>(name.substr(0, name.find('.')),
                                                              name.find('.') == std::string::npos
                                                                  ? ""
                                                                  : name.substr(name.find('.') + 1));
  auto h = c10::Dispatcher::singleton().findSchema({base, overload});
  if (!h) return error("unknown op " + name);
  s.op = *h;
  s.kernel = nullptr;
  s.sets.clear();
  if (!s.has_backend) return {{"ok", true}};
  for (const auto& k : s.backend.kernels)
    if (k.op == name) s.kernel = &k;
  if (s.kernel) return {{"ok", true}};
  if (auto it = s.backend.unusable.find(name); it != s.backend.unusable.end())
    return {{"problem", "the kernel is not usable: " + it->second}, {"failed", true}};
  return {{"problem", "the backend has no kernel for this op"}, {"failed", false}};
}

at::Tensor allocate(const json& j, std::map<int64_t, c10::Storage>& storages) {
  const wire::TensorMeta m = wire::meta_from(j);
  if (!m.defined) return at::Tensor();
  const auto options = at::TensorOptions().dtype(m.dtype).device(m.device);
  const int64_t sid = j.value("sid", int64_t{-1});
  auto it = storages.find(sid);
  if (sid < 0 || it == storages.end()) {
    c10::Storage storage = at::empty({static_cast<int64_t>(m.storage_bytes)}, options.dtype(at::kByte)).storage();
    it = storages.emplace(sid < 0 ? -1 - static_cast<int64_t>(storages.size()) : sid, storage).first;
  }
  at::Tensor t = at::empty({0}, options);
  t.set_(it->second, m.offset, m.sizes, m.strides);
  if (m.wrapped_number) t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// A view of `bytes` bytes of the IPC buffer from `at`, on the device.
at::Tensor buffer_bytes(State& s, uint64_t at, uint64_t bytes) {
  if (!s.buffer.ptr || at + bytes > s.buffer.bytes) throw std::runtime_error("outside the IPC buffer");
  return at::from_blob(static_cast<char*>(s.buffer.ptr) + at, {static_cast<int64_t>(bytes)},
                       at::TensorOptions().dtype(at::kByte).device(s.run.device));
}

// The inbox, mapped (again, when the reference made it larger) to hold `bytes`.
const char* inbox(State& s, uint64_t bytes) {
  if (bytes <= s.inbox_bytes) return s.inbox;
  if (s.inbox) ::munmap(const_cast<char*>(s.inbox), s.inbox_bytes);
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, kInboxFd, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot map the inbox: ") + std::strerror(errno));
  s.inbox = static_cast<const char*>(p);
  s.inbox_bytes = bytes;
  return s.inbox;
}

// Every argument's storage filled with what the reference put for it in the inbox (host memory) or the IPC
// buffer (device memory): `fill` has, per tensor of the arguments (wire::tensors_in's order), where its
// storage's bytes are, or null; a storage whose size differs (a kernel gave an out= argument new memory)
// is left as it is.
void fill(State& s, ArgSet& set, const json& fill) {
  const std::vector<at::Tensor> ts = wire::tensors_in(set.args);
  const json& at = fill.at("at");
  const uint64_t bytes = fill.value("inbox", uint64_t{0});
  for (size_t k = 0; k < ts.size() && k < at.size(); ++k) {
    if (at[k].is_null() || !ts[k].defined() || !ts[k].has_storage()) continue;
    const uint64_t from = at[k].at(0), n = at[k].at(1);
    if (n != ts[k].storage().nbytes()) continue;
    if (ts[k].is_cpu()) {
      if (from + n > bytes) throw std::runtime_error("outside the inbox");
      std::memcpy(ts[k].storage().mutable_data(), inbox(s, bytes) + from, n);
    } else {
      at::from_blob(ts[k].storage().mutable_data(), {static_cast<int64_t>(n)},
                    at::TensorOptions().dtype(at::kByte).device(ts[k].device()))
          .copy_(buffer_bytes(s, from, n));
    }
  }
  if (!s.run.device.is_cpu()) synchronize(s.run.device);
}

// The argument set a request names: made first (uninitialized, of the structure given) when the request
// says "values", filled when it says "fill".
ArgSet& arguments(State& s, const json& m) {
  Spent spent(phase::kTransfer);  // (the set made and filled from what the reference staged)
  const int64_t id = m.at("id").get<int64_t>();
  if (m.contains("values")) {
    std::map<int64_t, c10::Storage> storages;
    ArgSet set;
    set.args = wire::decode(m.at("values"), [&](const json& j) { return allocate(j, storages); });
    s.sets[id] = std::move(set);
  }
  ArgSet& set = set_of(s, m);
  if (m.contains("fill")) fill(s, set, m.at("fill"));
  return set;
}

// The bytes of a set's storages (its arguments' and its runs' results'), each storage once.
uint64_t set_bytes(const ArgSet& set) {
  std::set<const void*> seen;
  uint64_t bytes = 0;
  for (const c10::IValue& v : set.args) add_storage_bytes(v, seen, bytes);
  for (const Called& c : set.runs)
    for (const c10::IValue& v : c.results) add_storage_bytes(v, seen, bytes);
  return bytes;
}

// The byte ranges of the results' elements (address, bytes; the first 64 tensors'), for the reference to
// read at once, and 8-byte words of them read here at once at places drawn from `seed` (address, value):
// both are compared with the results as the reference reads them later (work still writing them after
// the return shows). What this process says of itself is the second line; the reference's own reads the
// first (docs/integrity.md).
json spans(const Values& results, uint64_t seed) {
  json out = json::array(), words = json::array();
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const at::Tensor& t : verify::tensors_of(results)) {
    if (!t.is_cpu() || !t.has_storage() || t.numel() == 0 || ranges.size() == 64) continue;
    ranges.emplace_back(reinterpret_cast<uint64_t>(t.const_data_ptr()),
                        at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.itemsize()));
  }
  uint64_t x = seed | 1;
  for (size_t k = 0; k < 16 * ranges.size() && k < 32; ++k) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    const auto& [at, bytes] = ranges[k % ranges.size()];
    if (bytes < 8) continue;
    const uint64_t where = at + ((x * 0x2545F4914F6CDD1Dull) % (bytes - 7));
    uint64_t value;
    std::memcpy(&value, reinterpret_cast<const void*>(where), 8);
    words.push_back({where, value});
  }
  for (const auto& [at, bytes] : ranges) out.push_back({at, bytes});
  return {{"spans", out}, {"words", words}};
}

json called_json(const ArgSet& set) {
  const Called& c = set.runs.back();
  return {{"native_call", c.native_call}, {"allowed_aten", c.allowed_aten}, {"run", set.runs.size() - 1}};
}

// Where this process's time went since its last reply, by phase (Spent::take()): the reference charges it
// to those phases instead of to its wait (Spent::charge_remote).
json spent_json() {
  json out = json::object();
  for (const auto& [phase, seconds] : Spent::take()) out[phase] = seconds;
  return out;
}

// Runs `fn`; a kernel's exceptions become the reply (a decline, or what it raised).
template <class F>
json guarded(F&& fn) {
  try {
    return fn();
  } catch (const bb::Decline& d) {
    return {{"declined", d.what()}};
  } catch (const c10::Error& e) {
    return {{"raised", e.what_without_backtrace() + host_limit_note(e.what_without_backtrace())}};
  } catch (const std::exception& e) {
    return {{"raised", e.what() + host_limit_note(e.what())}};
  }
}

json run(State& s, const json& m) {
  // (checked runs: the arguments made here and what the kernel allocates get red zones; timed runs none)
  const int poison = m.value("poison", 0);
  std::optional<RedZoneScope> zones;
  if (poison) zones.emplace();
  ArgSet& set = arguments(s, m);
  return guarded([&] {
    std::optional<PoisonScope> scope;
    if (poison) scope.emplace(static_cast<uint8_t>(poison), s.run.device);
    {
      // (a Python kernel's first call imports its files, and a Triton kernel compiles on its first call of
      // each shape and dtype: that time is charged to its own phase, not to "kernel runs", raised or not)
      struct ChargeLoad {
        double (*seconds)();
        double before;
        ~ChargeLoad() {
          if (seconds) Spent::charge_within(phase::kLoad, seconds() - before);
        }
      } charge{s.backend.python_load_seconds, s.backend.python_load_seconds ? s.backend.python_load_seconds() : 0};
      set.runs.push_back(call(s.op, s.kernel, set.args, s.run));
    }
    scope.reset();
    zones.reset();
    json out = called_json(set);
    if (std::string stray = out_of_bounds_writes(); !stray.empty()) out["out_of_bounds"] = stray;
    out["returned"] = spans(set.runs.back().results, m.value("seed", uint64_t{1}));
    out["described"] = describe(s, m);  // (what the reference would ask next)
    return out;
  });
}

// Before a host-timed call: its operands evicted, and the native-call watch's callback added (not while the
// reference watches the call's thread: only the call itself is in that window).
json ready(State& s, const json& m) {
  evict(arguments(s, m).args);
  synchronize(s.run.device);
  static const std::string nothing;
  s.watch.emplace(s.kernel ? s.kernel->op : nothing);
  return {{"ok", true}};
}

// The host-timed call: the first reply says how long it took (the reference's clock stops at it); then,
// asked again (the reference reads this thread's CPU time meanwhile, while it waits), what it returned.
// The timed region of a host-timed run: the timing path (its code is checked after every case, tamper.h).
BB_TIMING_PATH double timed_call(State& s, ArgSet& set, uint64_t seed, bool dry) {
  const uint64_t t0 = raw_monotonic_ns();
  if (!dry) {
    set.runs.push_back(call(s.op, s.kernel, set.args, s.run, true, true));
    touch(set.runs.back().results, seed);
  }
  return static_cast<double>(raw_monotonic_ns() - t0) / 1000.0;
}

void go(State& s, const json& m, int fd) {
  ArgSet& set = set_of(s, m);
  const uint64_t seed = m.at("seed");
  const bool dry = m.value("dry", false);  // (a run of nothing: the reference measures what the rest costs)
  if (dry && set.runs.empty()) throw std::runtime_error("a dry run needs a run before it");
  json rest = guarded([&] {
    const double us = timed_call(s, set, seed, dry);
    // (as the call returned, little more before the answer: where its results are, and words of them)
    return json{{"us", us}, {"returned", spans(set.runs.back().results, seed)}};
  });
  if (rest.contains("us")) {
    wire::send(fd, rest);
    rest = json();
  } else {
    wire::send(fd, {{"us", nullptr}});  // (the call raised or declined: the second answer says so)
  }
  const json more = wire::receive(fd);  // ("more": the reference has read this thread's CPU time)
  s.watch.reset();
  if (rest.is_null()) {
    rest = called_json(set);
    if (!dry) rest["described"] = describe(s, more);
  }
  rest["spent"] = spent_json();
  wire::send(fd, rest);
}

json timed(State& s, const json& m) {
  ArgSet& set = arguments(s, m);
  std::string why;
  CuptiCallTimer* timer = call_timer(s.run.device, &why);
  if (!timer) return error("no device timing: " + why);
  return guarded([&] {
    Called called;
    CuptiCallSample sample;
    {
      Spent evicting(phase::kEvict);  // (as the reference's native runs are charged)
      sample = timer->time([&] {
        Spent timed(phase::kTimed);
        called = call(s.op, s.kernel, set.args, s.run, true, false);
      });
      Spent::charge_within(phase::kCupti, (sample.steps.flush + sample.steps.collect) / 1e6);
    }
    set.runs.push_back(std::move(called));
    json out = called_json(set);
    out["device_us"] = sample.device_us;
    out["events_us"] = sample.events_us;
    out["activities"] = sample.activities;
    out["escaping"] = sample.findings.escaping;
    out["tampering"] = sample.findings.tampering;
    out["library"] = sample.findings.library;
    out["blinded"] = sample.findings.blinded;
    uint64_t end = 0;
    out["described"] = describe(s, m, 0, &end);
    if (!out["described"].contains("need")) let_arguments_go(set);
    // An earlier run's results as they are after this one (the reference's next reread, without a
    // round trip of its own), packed after this run's values.
    if (m.contains("also") && m["also"].is_object() && !out["described"].contains("need")) {
      try {
        out["also"] = describe(s, m["also"], end);
      } catch (const std::exception&) {  // (no such run here: the reference asks for it on its own, as before)
      }
    }
    return out;
  });
}

// The CUDA storages of `values` packed into the IPC buffer (overlapping ones as one range): each
// tensor's JSON gets "at", its storage's first byte in the buffer. False when the buffer is too small.
// From byte `base` of the buffer on; `*end`: the first byte after what was packed.
bool pack(State& s, const std::vector<at::Tensor>& ts, std::vector<json>& metas, uint64_t* need, uint64_t base,
          uint64_t* end) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // merged [lo, hi) of CUDA storages
  for (const at::Tensor& t : ts)
    if (t.defined() && t.is_cuda() && t.has_storage() && t.storage().nbytes()) {
      const auto lo = reinterpret_cast<uint64_t>(t.storage().data());
      ranges.emplace_back(lo, lo + t.storage().nbytes());
    }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : ranges)
    if (!merged.empty() && r.first < merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  std::vector<uint64_t> at;
  uint64_t used = base;
  for (const auto& [lo, hi] : merged) {
    at.push_back(used);
    used += (hi - lo + 511) / 512 * 512;
  }
  if (used > s.buffer.bytes) {
    *need = used;
    return false;
  }
  *end = used;
  for (size_t g = 0; g < merged.size(); ++g) {
    const auto [lo, hi] = merged[g];
    at::Tensor src = at::from_blob(reinterpret_cast<void*>(lo), {static_cast<int64_t>(hi - lo)},
                                   at::TensorOptions().dtype(at::kByte).device(s.run.device));
    buffer_bytes(s, at[g], hi - lo).copy_(src);
  }
  for (size_t k = 0; k < ts.size(); ++k) {
    if (!ts[k].defined() || !ts[k].is_cuda() || !ts[k].has_storage() || !ts[k].storage().nbytes()) continue;
    const auto a = reinterpret_cast<uint64_t>(ts[k].storage().data());
    for (size_t g = 0; g < merged.size(); ++g)
      if (a >= merged[g].first && a < merged[g].second) metas[k]["at"] = at[g] + (a - merged[g].first);
  }
  return true;
}

json describe(State& s, const json& m, uint64_t base, uint64_t* end) {
  Spent spent(phase::kTransfer);  // (the values described and packed for the reference)
  ArgSet& set = set_of(s, m);
  static const Called none;
  const int64_t run = m.value("run", static_cast<int64_t>(set.runs.size()) - 1);
  const Called& called = run >= 0 && run < static_cast<int64_t>(set.runs.size()) ? set.runs[run] : none;
  std::vector<json> metas;
  auto encode = [&](const Values& v) {
    return wire::encode(v, [&](const at::Tensor& t) {
      metas.push_back(wire::meta_json(wire::meta_of(t)));
      return json(metas.size() - 1);  // (an index, replaced below)
    });
  };
  // (results only: an earlier run's results read again, which is all that rereading needs)
  static const Values no_args;
  const bool results_only = m.value("results_only", false);
  if (!results_only && set.args_gone)
    throw std::runtime_error("argument set " + std::to_string(m.at("id").get<int64_t>()) +
                             ": its arguments were given back after its timed run; only its results can be described");
  const Values& args = results_only ? no_args : set.args;
  json out = {{"args", encode(args)}, {"results", encode(called.results)}};
  std::vector<at::Tensor> ts = wire::tensors_in(args);
  for (const at::Tensor& t : wire::tensors_in(called.results)) ts.push_back(t);
  if (m.value("pack", false)) {
    uint64_t need = 0, packed = base;
    if (!pack(s, ts, metas, &need, base, &packed)) return {{"need", need}};
    if (end) *end = packed;
    synchronize(s.run.device);
  }
  out["tensors"] = metas;
  return out;
}

json buffer(State& s, const json& m) {
  ipc_close(&s.buffer);
  if (std::string why = ipc_open(device_index(s.run.device), m.at("handle"), m.at("bytes"), &s.buffer); !why.empty())
    return error(why);
  return {{"ok", true}};
}

// What the case changed in this process that a kernel could use to fool what is measured here.
json case_end(State& s) {
  json findings = json::array();
  auto add = [&](const char* flag, const std::string& why) {
    if (!why.empty()) findings.push_back({{"flag", flag}, {"why", why}});
  };
  s.sets.clear();
  s.watch.reset();
  (void)out_of_bounds_writes();  // (what this case's checked runs did not report is not the next case's)
  if (std::string what = restore_process_baseline(); !what.empty())
    add("environment-tampering", "the kernel changed its process's state (set back): " + what);
  // (the timing path, the GOT and the imported functions' entries after every case; all of bbreplay's code
  // after every 32nd)
  const std::string code = code_changes(s.code, ++s.cases % 32 == 0);
  add("timer-tampering", code.empty() ? "" : "the kernel changed " + code);
  add("timer-tampering", syscall_changes(s.syscalls));
  if (std::string u = userfaultfds(); !u.empty())
    add("escaping-work", "the kernel's process holds a userfaultfd (" + u +
                             "): memory that computes itself when it is read, after the clock stopped");
  std::string overrides;
  for (const std::string& d : dispatcher_changes(s.dispatcher)) overrides += (overrides.empty() ? "" : ", ") + d;
  add("dispatcher-override", overrides.empty() ? "" : "a kernel was registered over ATen's own: " + overrides);
  if (!overrides.empty()) s.dispatcher = take_dispatcher_image();  // (said once)
  if (s.run.device.is_cuda()) {
    std::string why;
    if (CuptiCallTimer* timer = call_timer(s.run.device, &why))
      add("timer-tampering", timer->ownership());
  }
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }  // (orphans this process inherited as its namespace's first process)
  return {{"findings", findings}};
}

json answer(State& s, const json& m, int fd, bool* replied) {
  if (const auto f = m.find("free"); f != m.end()) {  // (sets the reference released since its last request)
    uint64_t freed = 0;
    for (int64_t id : f->get<std::vector<int64_t>>())
      if (auto it = s.sets.find(id); it != s.sets.end()) {
        freed += set_bytes(it->second);
        s.sets.erase(it);
      }
    // A large set's memory goes back to the device at once, not into this process's cache: the reference
    // shares the device, and between a large case's timed pairs it makes the next pair's copies and reads
    // this pair's values back while a set freed here would sit cached (the 1B trace's _foreach_ lists, 4.6
    // GiB a set, ran an H100 out of memory in the reference, 2026-12-07).
    if (freed >= kLargeCase && s.run.device.is_cuda()) {
      Spent spent(phase::kMemory);
      release_device_cache(s.run.device);
    }
  }
  const std::string cmd = m.at("cmd");
  if (cmd == "bind") return bind(s, m);
  if (cmd == "run") return run(s, m);
  if (cmd == "ready") return ready(s, m);
  if (cmd == "go") {
    go(s, m, fd);
    *replied = true;
    return {};
  }
  if (cmd == "timed") return timed(s, m);
  if (cmd == "describe") return describe(s, m);
  if (cmd == "buffer") return buffer(s, m);
  if (cmd == "case_end") return case_end(s);
  if (cmd == "release") {
    Spent spent(phase::kMemory);
    ipc_close(&s.buffer);
    release_device_cache(s.run.device);
    return {{"ok", true}};
  }
  if (cmd == "ping") return {{"pong", true}};
  return error("unknown request " + cmd);
}

// The first process of its own PID namespace (namespace isolation) receives no signal of its own
// namespace that it has no handler for, its own raise(SIGSEGV) or abort() included: with these handlers
// such a signal ends it, as it would any process, with status 128 + the signal (which its reference
// reads as a death by that signal).
void die_on_signals() {
  if (::getpid() != 1) return;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1,
                  SIGUSR2, SIGALRM, SIGXCPU, SIGXFSZ}) {
    struct sigaction a {};
    a.sa_handler = [](int s) { ::_exit(128 + s); };
    sigemptyset(&a.sa_mask);
    ::sigaction(sig, &a, nullptr);
  }
}

}  // namespace

int kernel_worker_main() {
  ::signal(SIGINT, SIG_IGN);  // (bbreplay stops its workers itself)
  die_on_signals();
  app::warn_each_once();
  const int fd = kChannelFd;
  State s;
  try {
    json m = wire::receive(fd);
    if (m.contains("memory") && m["memory"].get<uint64_t>() > 0)
      if (std::string why = limit_process_memory(m["memory"]); !why.empty())
        std::cerr << "bbreplay: the kernel's process memory is not limited: " << why << "\n";
    wire::send(fd, hello(s, m));
  } catch (const std::exception& e) {
    try {
      wire::send(fd, error(std::string("the kernel's process could not set up: ") + e.what()));
    } catch (const std::exception&) {
    }
    return 1;
  }
  for (;;) {
    json m;
    try {
      m = wire::receive(fd);
    } catch (const wire::Closed&) {
      return 0;
    }
    bool replied = false;
    json reply;
    try {
      reply = answer(s, m, fd, &replied);
    } catch (const wire::Closed&) {
      return 0;
    } catch (const std::exception& e) {
      reply = error(e.what());
    }
    if (replied) continue;
    if (reply.is_object()) reply["spent"] = spent_json();
    try {
      wire::send(fd, reply);
    } catch (const wire::Closed&) {
      return 0;
    }
  }
}

}  // namespace bb::replay
