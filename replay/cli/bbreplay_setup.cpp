// What a bbreplay parent and its workers set up alike (the trace, policy, backend, cases), a part's
// cases (--shard) and the workers' environments (--gpus, --jobs).
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "backends/content_hash.h"
#include "policy/policy.h"
#include "replay/cli/bbreplay_app.h"
#include "replay/judgeable/judgeable.h"
#include "tracer/format/torchbench.h"
#include "tracer/format/trace_summary.h"
#include "tracer/format/trace_yaml.h"

namespace bb::replay::app {

std::string library_path() {
  Dl_info info;
  char buf[PATH_MAX];
  if (::dladdr(reinterpret_cast<void*>(&library_path), &info) && info.dli_fname && ::realpath(info.dli_fname, buf))
    return buf;
  return "libbbreplay.so";
}
std::string lib_dir() {
  const std::string lib = library_path();
  return lib.find('/') == std::string::npos ? "." : lib.substr(0, lib.rfind('/'));
}
std::string exe_path() { return lib_dir() + "/../bin/bbreplay"; }

namespace {

std::vector<std::string> parse_variants(const std::string& list) {
  if (list.empty()) return all_variants();
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string v;
  while (std::getline(ss, v, ',')) {
    if (std::find(all_variants().begin(), all_variants().end(), v) == all_variants().end())
      throw Usage("unknown variant '" + v + "'");
    out.push_back(v);
  }
  return out;
}

// What makes two parts parts of one run (part.h): every setting that changes a result.
RunIdentity run_identity(const Options& o, const Setup& s) {
  auto given = [](const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : std::string("default"); };
  return {{"tool", std::string("bbreplay ") + BB_VERSION},
          {"torch", BB_TORCH_VERSION},
          {"trace", hash_file(o.trace)},
          {"backend", s.has_backend ? hash_folder(s.backend.dir) : "none"},
          {"policy", o.policy.empty() ? "none" : hash_file(o.policy)},
          {"seed", o.seed ? std::to_string(*o.seed) : std::string("a secret drawn from the OS by each part")},
          {"device", s.run.device.str()},
          {"ops", o.ops},
          {"variants", o.variants},
          {"mode", o.check_only  ? "check-only"
                   : o.perf_only ? "perf-only"
                                 : "check and time"},
          {"strict-strides", o.strict_strides ? "on" : "off"},
          {"repetitions", std::to_string(o.repetitions)},
          {"precision", std::to_string(o.precision)},
          {"budget", std::to_string(o.budget)},
          {"timeout", std::to_string(o.timeout)},
          {"max-case-bytes", given(o.max_case_bytes)}};
}

}  // namespace

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Usage("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Setup set_up(const Options& o, bool worker) {
  const bool quiet = worker;
  Setup s;
  // (a reference worker reads what bbreplay read, from sealed copies: the files may have changed since)
  const std::string fd_path = "/proc/self/fd/";
  s.trace = trace::load_any_trace(o.trace_fd >= 0 ? fd_path + std::to_string(o.trace_fd) : o.trace);
  if (!o.policy.empty()) {
    const std::string path = o.policy_fd >= 0 ? fd_path + std::to_string(o.policy_fd) : o.policy;
    s.policy = policy::load_policy(path);  // (with the reader's limits: a policy of /dev/zero is refused)
    s.policy_text = read_all(path);
  }
  std::string dir = !o.backend.empty() ? o.backend : s.policy ? s.policy->backend.value_or("") : "";
  s.has_backend = !dir.empty();
  const std::string device = o.device.empty() ? (at::hasCUDA() ? "cuda" : "cpu") : o.device;
  if (device != "cpu" && device != "cuda") throw Usage("--device must be cpu or cuda");
  if (device == "cuda" && !at::hasCUDA()) throw Usage("--device cuda but torch sees no CUDA device");
  s.run.device = c10::Device(device);
  s.run.seed = o.seed.value_or(0);
  s.run.thorough = !o.perf_only;
  s.run.time = !o.check_only;
  s.run.strict_strides = o.strict_strides;
  s.run.repetitions = o.repetitions;
  s.run.budget_seconds = o.budget;
  s.run.precision = o.precision;
  if (s.has_backend) {
    s.backend.dir = dir;
    s.python_kernels = has_python_kernels(dir);
  }
  if (s.has_backend && !(worker && o.native_only)) {  // (a reference worker: what its kernel worker loads)
    auto tc = backends::make_toolchain(BB_TORCH_LIB_DIR, BB_TORCH_VERSION, lib_dir() + "/../include", "");
    tc.python_bridge = lib_dir() + "/libbbshim_python.so";
    // A policy reads like data, but its backend: key makes bbreplay compile and run that folder's code.
    if (!quiet && o.backend.empty())
      std::cerr << "bbreplay: the policy " << o.policy << " names the backend " << dir
                << ": its code is compiled and run (--backend names a backend explicitly)\n";
    s.backend = backends::survey_backend(dir, tc);
    if (!quiet)
      for (const auto& p : s.backend.problems) std::cerr << "bbreplay: backend " << p << "\n";
  }
  if (worker) return s;
  // With a backend and no --ops, the ops the backend has a kernel for (usable or not).
  std::string selection = o.ops;
  if (selection.empty() && s.has_backend) {
    for (const auto& op : s.backend.ops) selection += op + ",";
    if (selection.empty()) throw Usage("backend " + dir + " has no kernel folder");
  }
  OpFilter filter(selection);
  std::vector<std::string> ops;
  for (const auto& e : s.trace.ops) ops.push_back(e.op);
  if (!quiet && !o.ops.empty())
    for (const auto& p : filter.unused(ops))
      std::cerr << "bbreplay: --ops pattern '" << p << "' matches no op of the trace (overloads are part of the "
                << "name: add.Tensor; add.* takes every overload)\n";
  auto applies = [](const trace::TraceEntry& e, const std::string& variant) {
    try {
      return variant_applies(bind_call(e), variant);
    } catch (const std::invalid_argument&) {
      return false;  // the traced case says why
    }
  };
  s.cases = enumerate_cases(s.trace, filter, parse_variants(o.variants), applies);
  return s;
}

CaseResult describe(const trace::TraceEntry& e, const std::string& variant, Status st, const std::string& why) {
  CaseResult r;
  r.op = e.op;
  r.signature = trace::signature_text(e);
  r.variant = variant;
  r.calls = e.count;
  r.status = st;
  r.message = why;
  return r;
}

std::vector<WorkerEnv> worker_slots(const Options& o, const Setup& s) {
  if (o.jobs > 1 && s.run.time)
    throw Usage(
        "--jobs above 1 needs --check-only: workers timed side by side on shared cores or one GPU would "
        "measure each other (--gpus spreads timed cases over GPUs, one worker each)");
  if (o.gpus.empty()) {
    // Workers sharing the cores share them out: each with its part of the intra-op threads (unless
    // OMP_NUM_THREADS says otherwise), or they spin waiting for each other (2 workers of 2 threads each
    // on 2 cores: 10x slower than one worker).
    WorkerEnv env;
    const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    if (o.jobs > 1 && !std::getenv("OMP_NUM_THREADS"))
      env.emplace_back("OMP_NUM_THREADS", std::to_string(std::max(1L, cores / o.jobs)));
    return std::vector<WorkerEnv>(static_cast<size_t>(std::max(o.jobs, 1)), env);
  }
  if (!s.run.device.is_cuda()) throw Usage("--gpus needs --device cuda");
  if (o.jobs > 1) throw Usage("--gpus and --jobs exclude each other: --gpus starts one worker per GPU");
  const int count = at::detail::getCUDAHooks().deviceCount();
  std::vector<int> picked;
  if (o.gpus == "all") {
    for (int d = 0; d < count; ++d) picked.push_back(d);
  } else {
    std::stringstream ss(o.gpus);
    for (std::string item; std::getline(ss, item, ',');) {
      char* end = nullptr;
      const long d = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end || d < 0 || d >= count)
        throw Usage("--gpus: '" + item + "' is not a device index below " + std::to_string(count) +
                    " (the GPUs torch sees)");
      if (std::find(picked.begin(), picked.end(), d) != picked.end()) throw Usage("--gpus: device " + item + " twice");
      picked.push_back(static_cast<int>(d));
    }
  }
  if (picked.empty()) throw Usage("--gpus: torch sees no GPU");
  std::vector<std::string> visible;  // what index d means to this process
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');) visible.push_back(item);
  }
  std::vector<WorkerEnv> slots;
  for (int d : picked)
    slots.push_back({{"CUDA_VISIBLE_DEVICES", d < static_cast<int>(visible.size()) ? visible[d] : std::to_string(d)}});
  return slots;
}

// --shard K/N: keeps this part's cases in s.cases, the others' in s.other_cases (shard.h).
PartInfo take_shard(const Options& o, Setup& s) {
  PartInfo part;
  part.shard = parse_shard(o.shard);
  try {
    part.identity = run_identity(o, s);
  } catch (const std::runtime_error& e) {
    throw Usage(e.what());
  }
  part.cases_total = s.cases.size();
  backends::ContentHash list;
  std::vector<uint64_t> costs;
  for (const Case& c : s.cases) {
    list.add(std::to_string(c.entry) + " " + c.variant);
    costs.push_back(case_cost(s.trace.ops[c.entry], c.variant, CostModel{s.run.time, o.repetitions, o.budget}));
  }
  part.cases_hash = list.hex();
  part.assigned = shard_cases(costs, part.shard);
  std::vector<Case> mine;
  for (size_t i = 0, next = 0; i < s.cases.size(); ++i) {
    const bool own = next < part.assigned.size() && part.assigned[next] == i;
    (own ? mine : s.other_cases).push_back(s.cases[i]);
    if (own) part.estimated_cost_us += costs[i], ++next;
  }
  s.cases = std::move(mine);
  return part;
}

void warn_each_once() {
  class Once final : public c10::WarningHandler {
   public:
    void process(const c10::Warning& w) override {
      if (seen_.size() < 1000 && seen_.insert(w.msg()).second) next_->process(w);
    }

   private:
    c10::WarningHandler* next_ = c10::WarningUtils::get_warning_handler();
    std::set<std::string> seen_;
  };
  static Once once;  // (the handler is the calling thread's: the worker's, where its calls run)
  c10::WarningUtils::set_warning_handler(&once);
}

}  // namespace bb::replay::app
