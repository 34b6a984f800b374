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

namespace bb::shim {
namespace {

std::atomic<TraceWriter*> g_writer{nullptr};
pid_t g_owner_pid = 0;
std::string* g_summary_path = nullptr;
std::atomic<bool> g_routing{false};  // routing is on: its counts need every call traced

// Sampled tracing's hold: every call must be traced while routing is on (a routed call is counted on
// the traced call it runs in) and while device timing ties launches to ops.
bool every_call_needed() {
  return g_routing.load(std::memory_order_relaxed) || tracer::device_timing_needs_every_call();
}

void write_routing_summary() {
  std::string summary = routing_summary();
  if (summary.empty()) return;
  if (g_summary_path && !g_summary_path->empty()) {
    std::string err = format::write_file_atomic(*g_summary_path, summary);
    if (err.empty()) return;
    log::warn("cannot write the routing summary: " + err);
  }
  log::warn(summary);
}

void at_exit() {
  if (::getpid() != g_owner_pid) return;  // a forked child never writes its parent's files
  write_routing_summary();
  if (TraceWriter* w = g_writer.load()) w->write("exited", true);
}

void in_forked_child() {
  g_writer.store(nullptr);
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

void start_tracing_here(const Config& cfg, const bb_boot_info& boot) {
  RunInfo run = current_run_info(boot.torch_version);
  std::string path = planned_trace_path(cfg.trace_path, run.id, current_dir());
  if (!check_writable(path)) return;
  static PathClaim claim;  // held for the life of the process
  std::string note;
  path = claim_trace_path(path, run.id.pid, claim, &note);
  if (!note.empty()) log::warn(note);

  tracer::TracerOptions options;
  options.max_signatures = cfg.max_signatures;
  options.int_ranges = cfg.int_ranges;
  tracer::DeviceTimingOptions timing;
  timing.enabled = cfg.device_time;
  timing.timeline = !cfg.timeline.empty() && cfg.device_time;
  timing.timeline_max_events = cfg.timeline_max_events;
  timing.torch_lib_dir = dir_of(boot.torch_lib);
  timing.first_calls = cfg.device_time_first;
  timing.first_calls_asked = cfg.device_time_first_asked;
  timing.calls = cfg.device_time_calls;
  timing.refresh_ms = static_cast<uint32_t>(cfg.device_time_refresh * 1000.0 + 0.5);
  timing.sample_on_ms = cfg.sample_on_ms;
  timing.sample_period_ms = cfg.sample_period_ms;
  tracer::configure_device_timing(timing);
  std::string timeline_path;
  if (timing.timeline) {
    static PathClaim timeline_claim;
    std::string note;
    timeline_path =
        claim_trace_path(planned_trace_path(cfg.timeline, run.id, current_dir()), run.id.pid, timeline_claim, &note);
    if (!note.empty()) log::warn(note);
  } else if (!cfg.timeline.empty()) {
    log::warn("BB_TIMELINE needs device timing; BB_DEVICE_TIME=0 turns both off");
  }
  tracer::TraceStore* store = tracer::start_tracing(options);
  tracer::install_cuda_support();
  if (cfg.trace_sample > 1) {
    tracer::TraceSamplingOptions sampling;
    sampling.every = cfg.trace_sample;
    tracer::start_trace_sampling(sampling, &every_call_needed);
  }

  auto* writer = new TraceWriter(store, path, std::move(run), timeline_path);  // never freed: used at exit
  g_writer.store(writer);
  if (!start_flusher([writer](const std::string& s, bool f) { return writer->write(s, f) && writer->wrote_file(); },
                     cfg.flush_seconds))
    log::warn("cannot start the background writer; the trace is written at exit only");
  install_signal_handlers();
  log::info("tracing torch " + std::string(boot.torch_version) + " ops to " + path);
}

void start_routing_here(const Config& cfg, const bb_boot_info& boot) {
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
  g_routing.store(true);  // before any op is routed: sampled tracing traces every call from now on
  const int routed = start_routing(std::move(backend), std::move(pol), named_by_policy);
  g_summary_path = new std::string(cfg.summary);
  log::info("routing " + std::to_string(routed) + " ops to the backend in " + dir);
}

int start(const bb_boot_info& boot) {
  Config cfg = config_from_env([](const char* n) { return std::getenv(n); });
  log::set_level(cfg.log_level);
  for (const auto& p : cfg.problems) log::warn(p);
  if (cfg.disabled) return 1;
  g_owner_pid = ::getpid();
  if (cfg.trace) start_tracing_here(cfg, boot);
  if (!cfg.backend.empty() || !cfg.policy.empty()) start_routing_here(cfg, boot);
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
