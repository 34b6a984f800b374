// bbreplay: check and benchmark kernels on the calls a program really made (docs/replay.md).
//   bbreplay TRACE [--backend DIR] [--policy F] [--ops LIST] [--device cpu|cuda] [--seed N]
//            [--variants LIST] [--check-only|--perf-only] [--json F] [--csv F] [--markdown F] [--shard K/N] ...
//   bbreplay merge PART.json... [--json F] [--csv F] [--markdown F]   (replay/merge_cli.cpp)
// Exit codes: 0 every checked case passed, 1 some case failed, crashed or timed out, 2 usage or input
// error (file:line:column for a bad trace or policy).
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "backends/content_hash.h"
#include "backends/loader.h"
#include "backends/python_kernels.h"
#include "replay/case_json.h"
#include "replay/cases.h"
#include "replay/cupti_call_timer.h"
#include "replay/judgeable.h"
#include "replay/memory.h"
#include "replay/part.h"
#include "replay/poison.h"
#include "replay/report_writers.h"
#include "replay/runner.h"
#include "replay/spent.h"
#include "replay/worker_pool.h"
#include "shim/atomic_file.h"
#include "tracer/format/tool_cli.h"
#include "tracer/format/torchbench.h"
#include "tracer/format/trace_summary.h"
#include "tracer/format/trace_yaml.h"

namespace {

using namespace bb;
using namespace bb::replay;

struct Options {
  std::string trace, backend, policy, ops, device, variants, json, csv, markdown;
  uint64_t seed = 0;
  bool check_only = false, perf_only = false, list = false, worker = false, strict_strides = false;
  int repetitions = 25, jobs = 1;
  double precision = 0.01;
  std::string gpus, shard;
  double budget = 2.0, timeout = 300;
  // 0: no limit. Unset (nullopt): the defaults, derived from the free memory (docs/replay.md, "Memory").
  std::optional<uint64_t> max_case_bytes, worker_memory;
};

using Usage = tool::UsageError;

// This library (libbbreplay.so) and its folder: bbreplay's own files are found from here, not from
// /proc/self/exe, which is python when bbreplay runs inside a Python host.
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

// Python kernels run in a process that hosts Python (docs/backends.md): when the backend has any and
// this process has no interpreter, bbreplay runs itself again inside the Python the build is for, which
// imports torch and calls bbreplay_main through ctypes (the GIL released; the bridge takes it per call).
// Workers are started as bbreplay too and do the same.
constexpr const char* kPythonHost =
    "import ctypes, os, sys\n"
    "import torch\n"
    "lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\n"
    "args = [a.encode() for a in sys.argv[2:]]\n"
    "argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)\n"
    "rc = lib.bbreplay_main(len(args), argv)\n"
    "sys.stdout.flush(); sys.stderr.flush()\n"
    "os._exit(rc)\n";

bool has_python_kernels(const std::string& dir) {
  std::vector<std::string> problems;
  for (const auto& d : backends::scan_backend(dir, problems))
    if (!d.python.empty()) return true;
  return false;
}

// Returns only when the Python host cannot be started (then: why).
std::string run_in_python(int argc, char** argv) {
  std::vector<std::string> args = {BB_PYTHON, "-c", kPythonHost, library_path(), exe_path()};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  // (exec keeps the pid: a host that still finds no interpreter sees its own pid here and stops)
  ::setenv("BB_REPLAY_PYTHON_HOST", std::to_string(::getpid()).c_str(), 1);
  ::execv(ptrs[0], ptrs.data());
  return std::string("cannot start ") + BB_PYTHON + " to host the backend's Python kernels: " + strerror(errno);
}

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

// Everything a parent and its workers set up the same way.
struct Setup {
  trace::Trace trace;
  std::optional<policy::Policy> policy;
  backends::Backend backend;
  bool has_backend = false;
  RunOptions run;
  std::vector<Case> cases;
  std::vector<Case> other_cases;  // --shard: the cases of the other parts

  const backends::LoadedKernel* kernel_for(const std::string& op) const {
    for (const auto& k : backend.kernels)
      if (k.op == op) return &k;
    return nullptr;
  }

  // Why an op has no usable kernel: a folder whose kernel failed to build or load fails the op's
  // cases with that message; an op without a folder is skipped.
  CaseResult problem_for(const std::string& op) const {
    CaseResult r;
    if (auto it = backend.unusable.find(op); it != backend.unusable.end()) {
      r.status = Status::Failed;
      r.message = "the kernel is not usable: " + it->second;
    } else {
      r.status = Status::Skipped;
      r.message = "the backend has no kernel for this op";
    }
    return r;
  }
};

// `worker`: a worker process, told each case by the parent; it neither lists the cases (asking native
// on meta tensors which variants apply took about a second, at every worker start) nor warns.
Setup set_up(const Options& o, bool worker) {
  const bool quiet = worker;
  Setup s;
  s.trace = trace::load_any_trace(o.trace);
  if (!o.policy.empty()) s.policy = policy::load_policy(o.policy);
  std::string dir = !o.backend.empty() ? o.backend : s.policy ? s.policy->backend.value_or("") : "";
  s.has_backend = !dir.empty();
  const std::string device = o.device.empty() ? (at::hasCUDA() ? "cuda" : "cpu") : o.device;
  if (device != "cpu" && device != "cuda") throw Usage("--device must be cpu or cuda");
  if (device == "cuda" && !at::hasCUDA()) throw Usage("--device cuda but torch sees no CUDA device");
  s.run.device = c10::Device(device);
  s.run.seed = o.seed;
  s.run.check = !o.perf_only;
  s.run.time = !o.check_only;
  s.run.strict_strides = o.strict_strides;
  s.run.repetitions = o.repetitions;
  s.run.budget_seconds = o.budget;
  s.run.precision = o.precision;
  if (s.has_backend) {
    auto tc = backends::make_toolchain(BB_TORCH_LIB_DIR, BB_TORCH_VERSION, lib_dir() + "/../include", "");
    tc.python_bridge = lib_dir() + "/libbbshim_python.so";
    // A policy reads like data, but its backend: key makes bbreplay compile and run that folder's code.
    if (!quiet && o.backend.empty())
      std::cerr << "bbreplay: the policy " << o.policy << " names the backend " << dir
                << ": its code is compiled and run (--backend names a backend explicitly)\n";
    s.backend = backends::load_backend(dir, tc);
    if (!quiet)
      for (const auto& p : s.backend.problems) std::cerr << "bbreplay: backend " << p << "\n";
  }
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
  if (!worker) s.cases = enumerate_cases(s.trace, filter, parse_variants(o.variants), applies);
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

// In a worker: limits what the process may allocate (--worker-memory, resolved by the parent) and
// returns what one case may take (--max-case-bytes; 0: no limit). By default an eighth
// (kCaseCopies) of the memory free to the worker: the least of its limit, the machine's available
// memory and, on CUDA, the device's free memory.
uint64_t worker_memory_limits(const Options& o, const c10::Device& device) {
  const uint64_t limit = o.worker_memory.value_or(0);
  if (limit) {
    if (std::string why = limit_process_memory(limit); !why.empty())
      std::cerr << "bbreplay: worker memory is not limited: " << why << "\n";
  }
  if (o.max_case_bytes) return *o.max_case_bytes;
  uint64_t free = available_host_bytes();
  if (limit && (free == 0 || limit < free)) free = limit;
  if (device.is_cuda())
    if (const uint64_t on_device = cuda_free_bytes(); on_device && (free == 0 || on_device < free)) free = on_device;
  return free / kCaseCopies;
}

// A case whose values (inputs and results, known from meta tensors before anything is allocated) take
// more than `budget`, skipped with that reason; nullopt for one that may run.
std::optional<CaseResult> beyond_budget(const trace::TraceEntry& entry, const std::string& variant, uint64_t budget) {
  if (budget == 0) return std::nullopt;
  std::optional<uint64_t> bytes;
  try {
    bytes = case_bytes(bind_call(entry), variant);
  } catch (const std::invalid_argument&) {  // (run_case says why the call cannot be bound)
    return std::nullopt;
  }
  if (!bytes || *bytes <= budget) return std::nullopt;
  return describe(entry, variant, Status::Skipped,
                  "its inputs and results take " + format_bytes(*bytes) + ", more than the memory budget of a case (" +
                      format_bytes(budget) + "; --max-case-bytes)");
}

int worker_main(const Options& o) {
  ::signal(SIGINT, SIG_IGN);           // bbreplay stops its workers itself
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and a worker does not outlive a bbreplay that was killed
  // Results go to a copy of stdout on a high descriptor, each line after the token that the parent
  // sent first (worker_pool.h); anything a kernel prints goes to stderr, anything it writes to the
  // descriptors it finds is ignored by the parent.
  std::string token;
  if (!std::getline(std::cin, token) || token.empty()) return 2;
  int proto = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 512);
  if (proto < 0) proto = ::dup(STDOUT_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  report_phases_to(proto, note_prefix(token));  // a crash or hang is charged to native or to the kernel
  const std::string ready = note_prefix(token) + "ready\n";
  Setup s = set_up(o, true);
  install_poisoning_allocator();
  s.run.policy = s.policy ? &*s.policy : nullptr;
  const uint64_t case_budget = worker_memory_limits(o, s.run.device);
  if (::write(proto, ready.data(), ready.size()) != static_cast<ssize_t>(ready.size())) return 1;
  std::string line;
  while (std::getline(std::cin, line)) {  // "<entry index> <variant>"
    Case c;
    std::istringstream in(line);
    if (!(in >> c.entry >> c.variant) || c.entry >= s.trace.ops.size()) return 2;
    const auto& entry = s.trace.ops[c.entry];
    const auto* kernel = s.has_backend ? s.kernel_for(entry.op) : nullptr;
    CaseResult result;
    Spent::take();
    const auto start = std::chrono::steady_clock::now();
    try {
      if (auto too_large = beyond_budget(entry, c.variant, case_budget)) result = std::move(*too_large);
      else
        result = run_case(entry, c.variant, kernel, s.run);
    } catch (const std::exception& e) {  // the harness's own failure: said, not hidden
      result =
          describe(entry, c.variant, Status::Skipped, std::string("bbreplay could not run this case: ") + e.what());
    }
    result.worker_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.spent = Spent::take();
    std::string out = reply_prefix(token) + case_to_json_line(result);
    if (::write(proto, out.data(), out.size()) != static_cast<ssize_t>(out.size())) return 1;
  }
  return 0;
}

// On a terminal a bar with the time spent and an estimate of the time left (from the pace so far);
// elsewhere a plain line whenever the op changes.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(::isatty(STDERR_FILENO)) {}
  void at(size_t done, const std::string& op) {
    if (tty_) {
      const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      constexpr int width = 24;
      const int filled = total_ ? static_cast<int>(width * done / total_) : width;
      std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done << "/"
                << total_ << "  " << clock(spent);
      if (done > 0) std::cerr << ", ~" << clock(spent / done * (total_ - done)) << " left";
      std::cerr << "  " << op << "\033[K" << std::flush;
    } else if (op != last_) {
      std::cerr << "bbreplay: [" << done << "/" << total_ << "] " << op << "\n";
    }
    last_ = op;
  }
  ~Progress() {
    if (tty_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  static std::string clock(double seconds) {
    const long s = std::lround(seconds);
    std::ostringstream out;
    out << s / 60 << ":" << std::setw(2) << std::setfill('0') << s % 60;
    return out.str();
  }

  size_t total_;
  bool tty_;
  std::string last_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Other work on the machine makes multi-threaded native kernels wait for cores (on a 2-core VM under
// a parallel build, native layer norm read 2800x its idle time): said in the report, not hidden.
std::string busy_machine() {
  std::ifstream f("/proc/loadavg");
  double load = 0;
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (!(f >> load) || cores <= 0 || load <= 0.75 * static_cast<double>(cores)) return "";
  std::ostringstream s;
  s << "the machine is busy (load average " << load << " on " << cores << " cores): CPU timings are unreliable";
  return s.str();
}

// SIGINT or SIGTERM to bbreplay: the case in progress is abandoned, its worker killed, and the report
// of the cases done so far is written (an interrupted run exits 1).
// A second signal ends bbreplay at once, as if it had no handler.
volatile std::sig_atomic_t g_stop = 0;
void on_stop_signal(int sig) {
  if (g_stop) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  g_stop = sig;
}

void stop_on_signals() {
  struct sigaction a {};
  a.sa_handler = on_stop_signal;  // no SA_RESTART: a worker's poll wakes at once
  sigemptyset(&a.sa_mask);
  ::sigaction(SIGINT, &a, nullptr);
  ::sigaction(SIGTERM, &a, nullptr);
}

// Native crashed, with no kernel of the backend running: a traced call is one the harness built
// wrongly (its defect, never the kernel's); a variant's shapes or layout, made from the traced call,
// are ones native's kernels do not take (cuDNN attention segfaults on a noncontiguous query), so the
// variant does not apply, as where native rejects it (runner.cpp).
CaseResult native_crashed(const trace::TraceEntry& entry, const std::string& variant, const std::string& what) {
  if (variant != "traced")
    return describe(entry, variant, Status::Skipped,
                    "variant " + variant + " does not apply to this call (native " + what + ")");
  return describe(entry, variant, Status::Invalid, "native " + what + ": a harness defect");
}

// One worker's environment: what it adds to or changes in bbreplay's own (CUDA_VISIBLE_DEVICES for a
// worker pinned to one GPU).
using WorkerEnv = std::vector<std::pair<std::string, std::string>>;

// One case, asked of `worker` (started when there is none); nullopt when interrupted.
std::optional<CaseResult> run_one(const Options& o, const Setup& s, size_t i, std::unique_ptr<Worker>& worker,
                                  const std::vector<std::string>& worker_argv, const WorkerEnv& env) {
  const auto& entry = s.trace.ops[s.cases[i].entry];
  const std::string& variant = s.cases[i].variant;
  if (s.has_backend && !s.kernel_for(entry.op)) {
    const CaseResult problem = s.problem_for(entry.op);
    return describe(entry, variant, problem.status, problem.message);
  }
  const auto start = std::chrono::steady_clock::now();
  if (!worker) worker = std::make_unique<Worker>(worker_argv, env);
  std::string reply, why;
  CaseResult r;
  switch (worker->ask(std::to_string(s.cases[i].entry) + " " + variant, o.timeout, &reply, &why, &g_stop)) {
    case Worker::Outcome::Reply: try { r = case_from_json_line(reply);
      } catch (const std::invalid_argument& e) {  // (a worker of this build always sends JSON)
        r = describe(entry, variant, Status::Crashed, std::string("the worker's reply was not a result: ") + e.what());
        worker.reset();
      }
      break;
    case Worker::Outcome::Died:
      r = worker->last_note() == "native"
              ? native_crashed(entry, variant, "crashed on this call (the worker " + why + ")")
              : describe(entry, variant, Status::Crashed, "the worker " + why);
      worker.reset();
      break;
    case Worker::Outcome::TimedOut:
      // (not a variant's skip like a crash: native may only be slower than --timeout allows)
      r = worker->last_note() == "native"
              ? describe(entry, variant, Status::Invalid, "native hung on this call (" + why + "): a harness defect")
              : describe(entry, variant, Status::Timeout, why);
      worker.reset();
      break;
    case Worker::Outcome::Interrupted: worker.reset(); return std::nullopt;
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// The cases, in order, spread over one worker per entry of `slots` (a thread each, taking the next
// case as it finishes one); the report lists them in case order whichever worker ran them.
// `positions`, if given, gets the position in s.cases of each case of the report.
Report run_all(const Options& o, const Setup& s, const std::vector<std::string>& worker_argv,
               const std::vector<WorkerEnv>& slots, std::vector<size_t>* positions = nullptr) {
  Report report;
  ReportMeta& m = report.meta;
  m.tool = std::string("bbreplay ") + BB_VERSION;
  m.trace = o.trace;
  m.backend = s.has_backend ? s.backend.dir : "native (self-check: native against native)";
  m.device = s.run.device.str();
  m.torch = BB_TORCH_VERSION;
  m.date = trace::utc_now();
  m.timing = timing_method(s.run);
  m.seed = o.seed;
  m.self_check = !s.has_backend;
  if (slots.size() > 1) {
    report.meta.timing += "; " + std::to_string(slots.size()) + " workers at once";
    if (s.run.device.is_cuda()) report.meta.timing += ", one per GPU";
  }
  if (s.run.time) {
    if (std::string busy = busy_machine(); !busy.empty()) {
      std::cerr << "bbreplay: warning: " << busy << "\n";
      report.meta.timing += "; WARNING: " + busy;
    }
  }
  std::vector<std::optional<CaseResult>> results(s.cases.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex shown;
  Progress progress(s.cases.size());
  auto serve = [&](const WorkerEnv& env) {
    std::unique_ptr<Worker> worker;
    for (size_t i; !g_stop && (i = next++) < s.cases.size();) {
      {
        std::lock_guard<std::mutex> lock(shown);
        progress.at(done, s.trace.ops[s.cases[i].entry].op);
      }
      try {
        results[i] = run_one(o, s, i, worker, worker_argv, env);
      } catch (const std::exception& e) {  // (no worker could be started): said, and the run goes on
        const auto& entry = s.trace.ops[s.cases[i].entry];
        results[i] = describe(entry, s.cases[i].variant, Status::Skipped,
                              std::string("bbreplay could not run this case: ") + e.what());
        worker.reset();
      }
      ++done;
    }
  };
  std::vector<std::thread> threads;
  for (size_t k = 1; k < slots.size(); ++k) threads.emplace_back(serve, std::cref(slots[k]));
  serve(slots.front());
  for (auto& t : threads) t.join();
  // What of the traced program this run judges (Report::coverage): each case carries its signature's
  // traced device time; signatures without a traced case that ran are listed as not replayed.
  std::vector<bool> has_traced_case(s.trace.ops.size(), false), has_case(s.trace.ops.size(), false);
  for (size_t i = 0; i < s.cases.size(); ++i) {
    const trace::TraceEntry& entry = s.trace.ops[s.cases[i].entry];
    has_case[s.cases[i].entry] = true;
    if (s.cases[i].variant == "traced" && results[i]) has_traced_case[s.cases[i].entry] = true;
    if (!results[i]) continue;
    if (positions) positions->push_back(i);
    results[i]->traced_device_us = traced_device_us(entry);
    report.cases.push_back(std::move(*results[i]));
  }
  for (const Case& c : s.other_cases) {  // judged by another part
    has_case[c.entry] = true;
    if (c.variant == "traced") has_traced_case[c.entry] = true;
  }
  std::map<std::pair<std::string, std::string>, NotJudged> missed;
  for (size_t e = 0; e < s.trace.ops.size(); ++e) {
    if (has_traced_case[e]) continue;
    const trace::TraceEntry& entry = s.trace.ops[e];
    const std::string why = g_stop && has_case[e]            ? kNotRunReason
                            : has_case[e]                    ? "traced case not selected by --variants"
                            : s.has_backend && o.ops.empty() ? kNoKernel
                                                             : "not selected by --ops";
    NotJudged& n = missed[{entry.op, why}];
    n.op = entry.op;
    n.reason = why;
    n.calls += entry.count;
    n.device_us += traced_device_us(entry);
  }
  for (auto& [key, n] : missed) report.meta.not_replayed.push_back(n);
  if (g_stop) {
    std::ostringstream why;
    why << "stopped by " << sigabbrev_np(g_stop) << " after " << report.cases.size() << " of " << s.cases.size()
        << " cases; the others did not run";
    report.meta.interrupted = why.str();
    std::cerr << "\nbbreplay: " << why.str() << "\n";
  }
  return report;
}

// Each worker's environment: one per GPU of --gpus (CUDA_VISIBLE_DEVICES naming it, mapped through
// bbreplay's own CUDA_VISIBLE_DEVICES when that is set), --jobs copies of bbreplay's own otherwise.
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

// Written whole or not at all.
void write_file(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  if (std::string why = shim::write_file_atomic(path, text); !why.empty()) throw Usage(why);
}

// What makes two parts parts of one run (part.h): every setting that changes a result.
RunIdentity run_identity(const Options& o, const Setup& s) {
  auto given = [](const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : std::string("default"); };
  return {{"tool", std::string("bbreplay ") + BB_VERSION},
          {"torch", BB_TORCH_VERSION},
          {"trace", hash_file(o.trace)},
          {"backend", s.has_backend ? hash_folder(s.backend.dir) : "none"},
          {"policy", o.policy.empty() ? "none" : hash_file(o.policy)},
          {"seed", std::to_string(o.seed)},
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

// torch's CUDA kernels and hooks live in libtorch_cuda, which nothing here links: loaded when this
// torch has it, so that --device cuda finds the CUDA dispatch keys (a CPU-only torch has none).
void load_torch_cuda() {
  const std::string lib = std::string(BB_TORCH_LIB_DIR) + "/libtorch_cuda.so";
  if (::access(lib.c_str(), R_OK) == 0 && !::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL))
    std::cerr << "bbreplay: cannot load " << lib << ": " << ::dlerror() << " (CUDA unavailable)\n";
}

}  // namespace

// The whole of bbreplay; replay/bbreplay_main.cpp is its executable, and a Python host calls it too.
extern "C" __attribute__((visibility("default"))) int bbreplay_main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "merge") return merge_main(argc - 1, argv + 1);  // (no torch needed)
  load_torch_cuda();
  Options o;
  CLI::App app{
      "bbreplay: check and benchmark kernels on the calls a program really made\n"
      "  bbreplay merge PART.json... merges the parts of a run made with --shard (bbreplay merge --help)"};
  app.add_option("trace", o.trace, "bbshim trace (YAML) or TorchBench operator-input log")->required();
  app.add_option("--backend", o.backend,
                 "backend folder with the kernels under test (default: native against native, a self-check)");
  app.add_option("--policy", o.policy, "routing policy: its tolerances (and backend, if it names one)");
  app.add_option("--ops", o.ops,
                 "ops to replay, comma-separated: full overload names (relu, add.Tensor, aten::mm), * and ? as "
                 "wildcards (add.*, *_backward); default all");
  app.add_option("--device", o.device, "cpu or cuda (default: cuda when torch sees one)");
  app.add_option("--seed", o.seed, "seed of every input")->capture_default_str();
  app.add_option("--variants", o.variants,
                 "comma-separated: traced, noncontiguous, special-values, empty, scalar, odd-size (default all)");
  auto* check_only = app.add_flag("--check-only", o.check_only, "check correctness, do not time");
  app.add_flag("--perf-only", o.perf_only, "time, do not compare results")->excludes(check_only);
  app.add_flag("--strict-strides", o.strict_strides,
               "fail a functional op's result whose values match native's but whose strides differ (default: "
               "passes with a note; in-place, out= and view results are always compared strictly)");
  // (0 repetitions made the self-check segfault; nan, inf and negative seconds timed every case out)
  const CLI::Validator positive_seconds(
      [](std::string& v) {
        const double x = std::strtod(v.c_str(), nullptr);
        return std::isfinite(x) && x > 0 && x <= 1e6 ? std::string() : "expected seconds in (0, 1e6], got " + v;
      },
      "SECONDS");
  app.add_option("--repetitions", o.repetitions,
                 "timed runs per kernel and case (fewer once --precision is met; up to 4x as many while a side's "
                 "times are unstable)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--precision", o.precision,
                 "stop repeating a case once each side's median is known to within this fraction (half-width of "
                 "its 95% confidence interval; 0: always make --repetitions)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--budget", o.budget, "seconds of timing per case, roughly")
      ->capture_default_str()
      ->check(positive_seconds);
  app.add_option("--timeout", o.timeout, "seconds before a case is declared hung")
      ->capture_default_str()
      ->check(positive_seconds);
  app.add_option("--gpus", o.gpus,
                 "CUDA devices to spread the cases over, one worker pinned to each: all, or indices (0,2,3); "
                 "default: one worker on the first");
  app.add_option("--jobs", o.jobs,
                 "worker processes at once on one device, for --check-only (timed cases: --gpus, one worker per GPU)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  // Sizes: 123, 512K, 1.5G, 2T (binary units); 0: no limit.
  auto bytes_option = [&app](const char* name, std::optional<uint64_t>& into, const char* help) {
    app.add_option_function<std::string>(
           name,
           [&into, name](const std::string& v) {
             into = parse_bytes(v);
             if (!into) throw CLI::ValidationError(name, "expected a size such as 512M or 2G, got " + v);
           },
           help)
        ->type_name("BYTES")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  bytes_option("--max-case-bytes", o.max_case_bytes,
               "skip cases whose inputs and results take more (512M, 2G; 0: no limit; default: an eighth of the "
               "memory free to a worker, on CUDA of the device's free memory too)");
  bytes_option("--worker-memory", o.worker_memory,
               "memory a worker process may allocate on the host; beyond it an allocation fails, and so does the "
               "case (0: no limit; default: three quarters of the available memory, shared among the workers)");
  app.add_option("--json", o.json, "write the report as JSON");
  app.add_option("--csv", o.csv, "write the report as CSV (one row per case)");
  app.add_option("--markdown", o.markdown, "write the report as Markdown");
  app.add_option("--shard", o.shard,
                 "run part K of N (K from 0: $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT of an array started at 0), "
                 "cases balanced by expected cost; --json writes the part for bbreplay merge")
      ->type_name("K/N")
      ->check([](const std::string& v) {
        try {
          parse_shard(v);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  app.add_flag("--list", o.list, "list the cases and exit");
  app.add_flag("--worker", o.worker, "internal: serve cases on stdin")->group("");
  if (auto status = tool::parse(app, argc, argv)) return *status;
  return tool::run("bbreplay", [&] {
    if (!backends::python_in_process()) {
      std::string dir = o.backend;
      if (dir.empty() && !o.policy.empty()) dir = policy::load_policy(o.policy).backend.value_or("");
      if (!dir.empty() && has_python_kernels(dir)) {
        const char* host = std::getenv("BB_REPLAY_PYTHON_HOST");
        if (host && std::to_string(::getpid()) == host)
          throw Usage(BB_PYTHON " runs bbreplay without Python's symbols visible: cannot run Python kernels");
        throw Usage(run_in_python(argc, argv));
      }
    }
    if (o.worker) return worker_main(o);
    Setup s = set_up(o, false);
    if (s.cases.empty()) throw Usage("no case to run: no op of the trace matches --ops");
    std::optional<PartInfo> part;
    if (!o.shard.empty()) {
      if (o.json.empty() && !o.list) throw Usage("--shard needs --json F: the part's results, for bbreplay merge");
      part = take_shard(o, s);
    }
    if (o.list) {
      for (size_t i = 0; i < s.cases.size(); ++i)
        std::cout << s.trace.ops[s.cases[i].entry].op << "  (" << trace::signature_text(s.trace.ops[s.cases[i].entry])
                  << ")  " << s.cases[i].variant << "\n";
      return 0;
    }
    std::vector<std::string> worker_argv(argv, argv + argc);
    worker_argv[0] = exe_path();
    worker_argv.push_back("--worker");
    const auto slots = worker_slots(o, s);
    // Resolved once here, so that every worker has the same limit however much is free when it starts.
    if (!o.worker_memory) o.worker_memory = available_host_bytes() / 4 * 3 / slots.size();
    worker_argv.push_back("--worker-memory=" + std::to_string(*o.worker_memory));
    stop_on_signals();
    Report report = run_all(o, s, worker_argv, slots, part ? &part->positions : nullptr);
    std::cout << make_writer("console")->render(report);
    if (part)
      for (size_t& p : part->positions) p = part->assigned[p];  // positions in the whole run's case list
    write_file(o.json, part ? render_part(report, *part) : make_writer("json")->render(report));
    write_file(o.csv, make_writer("csv")->render(report));
    write_file(o.markdown, make_writer("markdown")->render(report));
    return report.all_passed() ? 0 : 1;
  });
}
