// libbbshim_runtime.so: the torch-facing second stage. The bootstrap loads it once libtorch is in the
// process and calls bbshim_runtime_start().
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "shim/boot_info.h"
#include "shim/config.h"
#include "shim/flusher.h"
#include "shim/output_path.h"
#include "shim/router.h"
#include "shim/trace_writer.h"
#include "tracer/format/atomic_file.h"
#include "tracer/format/trace_yaml.h"
#include "tracer/cuda_support.h"
#include "tracer/log.h"
#include "tracer/observer.h"
#include "tracer/process_state.h"

namespace bb::shim {
namespace {

// The runtime's process state: the settings it started with, the trace writer, whether routing is
// on. Made once by start() (unless BB_DISABLE) and never freed: the exit and fork handlers and
// sampled tracing's thread use it until the process ends. Reached through runtime(), null before.
struct Runtime {
  explicit Runtime(Config c) : config(std::move(c)) {}
  const Config config;
  const pid_t owner_pid = ::getpid();         // a forked child never writes its parent's files
  std::atomic<TraceWriter*> writer{nullptr};  // never freed: used at exit
  std::atomic<bool> routing{false};           // routing is on: its counts need every call traced
};

std::atomic<Runtime*>& started() {
  BB_CONSTINIT static std::atomic<Runtime*> runtime{nullptr};
  return runtime;
}
Runtime* runtime() { return started().load(std::memory_order_acquire); }

// Sampled tracing's hold (a plain function pointer): every call must be traced while routing is on
// (a routed call is counted on the traced call it runs in) and while device timing ties launches to
// ops.
bool every_call_needed() {
  const Runtime* rt = runtime();
  return (rt && rt->routing.load(std::memory_order_relaxed)) || tracer::device_timing_needs_every_call();
}

void write_routing_summary(const std::string& path) {
  std::string summary = routing_summary();
  if (summary.empty()) return;
  if (!path.empty()) {
    std::string err = format::write_file_atomic(path, summary);
    if (err.empty()) return;
    log::warn("cannot write the routing summary: " + err);
  }
  log::warn(summary);
}

// atexit's handler.
void at_exit() {
  Runtime& rt = *runtime();
  if (::getpid() != rt.owner_pid) return;  // a forked child never writes its parent's files
  write_routing_summary(rt.config.summary);
  if (TraceWriter* w = rt.writer.load()) w->write("exited", true);
}

// pthread_atfork's child handler.
void in_forked_child() {
  runtime()->writer.store(nullptr);
  tracer::forget_device_timing();
  tracer::reset_after_fork(/*keep_tracing=*/false);
  restore_signal_handlers();
}

std::string current_dir() {
  char buf[PATH_MAX];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string(".");
}

std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

// The folder must exist and be writable now; otherwise say so once and do not trace at all.
bool check_writable(const std::string& path) {
  std::string dir = dir_of(path);
  if (dir.empty()) dir = "/";
  if (::access(dir.c_str(), W_OK) == 0) return true;
  log::warn("cannot write the trace to " + path + ": " + std::strerror(errno) +
            "; tracing is off for this process (set BB_TRACE to a writable path)");
  return false;
}

void start_tracing_here(Runtime& rt, const bb_boot_info& boot) {
  const Config& cfg = rt.config;
  RunInfo run = current_run_info(boot.torch_version);
  std::string path = planned_trace_path(cfg.trace_path, run.id, current_dir());
  if (!check_writable(path)) return;
  static PathClaim claim;  // held for the life of the process
  std::string note;
  path = claim_trace_path(path, run.id.pid, claim, &note);
  if (!note.empty()) log::warn(note);

  const bool keep_timeline = !cfg.timeline.empty() && cfg.device_timing.enabled;
  std::string timeline_path;
  if (keep_timeline) {
    static PathClaim timeline_claim;
    std::string note;
    timeline_path =
        claim_trace_path(planned_trace_path(cfg.timeline, run.id, current_dir()), run.id.pid, timeline_claim, &note);
    if (!note.empty()) log::warn(note);
  } else if (!cfg.timeline.empty()) {
    log::warn("BB_TIMELINE needs device timing; BB_DEVICE_TIME=0 turns both off");
  }
  tracer::TraceStore* store = tracer::start_tracing(cfg.tracer);
  tracer::install_cuda_support(cfg.device_timing, keep_timeline, dir_of(boot.torch_lib));
  if (cfg.trace_sampling.enabled()) tracer::start_trace_sampling(cfg.trace_sampling, &every_call_needed);

  auto* writer = new TraceWriter(store, path, std::move(run), timeline_path);  // never freed: used at exit
  rt.writer.store(writer);
  if (!start_flusher([writer](const std::string& s, bool f) { return writer->write(s, f) && writer->wrote_file(); },
                     cfg.flush_seconds))
    log::warn("cannot start the background writer; the trace is written at exit only");
  install_signal_handlers();
  log::info("tracing torch " + std::string(boot.torch_version) + " ops to " + path);
}

void start_routing_here(Runtime& rt, const bb_boot_info& boot) {
  const Config& cfg = rt.config;
  policy::Policy pol;  // implied: every op the backend provides, default settings
  if (!cfg.policy.empty()) {
    try {
      pol = cfg.policy_section.empty() ? policy::load_policy(cfg.policy)
                                       : policy::load_policy_section(cfg.policy, cfg.policy_section);
    } catch (const format::InputError& e) {
      log::warn(std::string("policy error: ") + e.what() + "; routing is off");
      return;
    }
  }
  const std::string dir = !cfg.backend.empty() ? cfg.backend : pol.backend.value_or("");
  if (dir.empty()) {
    log::warn("BB_POLICY names no backend and BB_BACKEND is not set; routing is off");
    return;
  }
  const bool named_by_policy = cfg.backend.empty();
  // A policy reads like data, but its backend: key makes this process compile and run that folder's code.
  if (named_by_policy)
    log::warn("the policy " + pol.source + " names the backend " + dir +
              ": its code is compiled and runs inside this program (BB_BACKEND names a backend explicitly)");
  auto tc = backends::make_toolchain(dir_of(boot.torch_lib), boot.torch_version,
                                     std::string(boot.lib_dir) + "/../include", "");
  tc.python_bridge = std::string(boot.lib_dir) + "/libbbshim_python.so";  // for folders of Python kernels
  backends::Backend backend = backends::load_backend(dir, tc);
  for (const auto& problem : backend.problems) log::warn("backend " + problem);
  for (const auto& folder : backend.python_elsewhere)
    log::warn("backend " + folder + ": Python kernels, and this program runs no Python interpreter: not routed");
  rt.routing.store(true);  // before any op is routed: sampled tracing traces every call from now on
  const int routed = start_routing(std::move(backend), std::move(pol), named_by_policy);
  log::info("routing " + std::to_string(routed) + " ops to the backend in " + dir);
}

int start(const bb_boot_info& boot) {
  Config cfg = config_from_env([](const char* n) { return std::getenv(n); });
  log::set_level(cfg.log_level);
  for (const auto& p : cfg.problems) log::warn(p);
  if (cfg.disabled) return 1;
  auto* rt = new Runtime(std::move(cfg));  // never freed
  started().store(rt);
  if (rt->config.trace) start_tracing_here(*rt, boot);
  if (!rt->config.backend.empty() || !rt->config.policy.empty()) start_routing_here(*rt, boot);
  std::atexit(&at_exit);
  pthread_atfork(nullptr, nullptr, &in_forked_child);
  return 0;
}

}  // namespace
}  // namespace bb::shim

extern "C" __attribute__((visibility("default"))) int bbshim_runtime_start(const bb_boot_info* boot) {
  static std::atomic<bool> started{false};
  if (!boot || boot->abi != BB_BOOT_ABI || started.exchange(true)) return 1;
  try {
    return bb::shim::start(*boot);
  } catch (const std::exception& e) {
    bb::log::warn(std::string("the runtime failed to start: ") + e.what() + "; the program continues untraced");
  } catch (...) {
    bb::log::warn("the runtime failed to start; the program continues untraced");
  }
  return 1;
}
