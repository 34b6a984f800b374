// bbreplay's parent: the cases spread over its workers, crashes and hangs made results, progress shown,
// what was not judged said, and the report put together.
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "replay/cli/bbreplay_app.h"
#include "replay/report/case_json.h"
#include "replay/judgeable/judgeable.h"
#include "replay/workers/worker_pool.h"

#include <nlohmann/json.hpp>
#include <set>
#include "tracer/format/trace_summary.h"

namespace bb::replay::app {

namespace {

// On a terminal a bar with the time spent and an estimate of the time left (from the pace so far),
// updated in place; elsewhere (a log, CI) the same as a plain line every `every` seconds (--progress-every);
// nothing under --quiet.
class Progress {
 public:
  Progress(size_t total, bool quiet, double every)
      : total_(total), tty_(::isatty(STDERR_FILENO)), quiet_(quiet), every_(every) {}
  void at(size_t done, const std::string& op) {
    if (quiet_) return;
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (tty_) {
      constexpr int width = 24;
      const int filled = total_ ? static_cast<int>(width * done / total_) : width;
      std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done << "/"
                << total_ << "  " << clock(spent);
      if (done > 0) std::cerr << ", ~" << clock(spent / done * (total_ - done)) << " left";
      std::cerr << "  " << op << "\033[K" << std::flush;
    } else if (spent >= next_line_) {  // (the first call too: next_line_ starts at 0)
      next_line_ = spent + every_;
      std::cerr << "bbreplay: " << done << "/" << total_ << " cases, " << clock(spent) << " spent";
      if (done > 0) std::cerr << ", ~" << clock(spent / done * (total_ - done)) << " left";
      std::cerr << "; " << op << "\n";
    }
  }
  ~Progress() {
    if (tty_ && !quiet_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  static std::string clock(double seconds) {
    const long s = std::lround(seconds);
    std::ostringstream out;
    out << s / 60 << ":" << std::setw(2) << std::setfill('0') << s % 60;
    return out.str();
  }

  size_t total_;
  bool tty_, quiet_;
  double every_;
  double next_line_ = 0;  // (seconds since the start: when the next plain line is due)
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

volatile std::sig_atomic_t g_stop = 0;
void on_stop_signal(int sig) {
  if (g_stop) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  g_stop = sig;
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

// What the worker's "ready" note said: the isolation of its kernel worker, the backend's load problems.
struct Readiness {
  std::mutex mu;
  std::set<std::string> isolation;
  bool problems_said = false;
  void take(const std::string& info) {
    if (info.empty()) return;
    std::lock_guard<std::mutex> lock(mu);
    try {
      const auto j = nlohmann::json::parse(info);
      if (const std::string i = j.value("isolation", ""); !i.empty()) isolation.insert(i);
      if (!problems_said && j.contains("problems")) {
        for (const auto& p : j["problems"]) std::cerr << "bbreplay: backend " << p.get<std::string>() << "\n";
        problems_said = true;
      }
      if (const std::string why = j.value("started", ""); !why.empty())
        std::cerr << "bbreplay: the kernel's process could not be started: " << why << "\n";
    } catch (const nlohmann::json::exception&) {
    }
  }
};

// The reference worker died, or hung, while native ran there and a kernel's process was alive beside it.
// Native's fault only if it does so again with no kernel's process anywhere (a reference worker whose
// kernel worker loaded no backend): a kernel that killed or stopped it (possible where namespaces are
// refused) fails only its own case.
CaseResult native_failed_again(const Options& o, const Launch& launch, const trace::TraceEntry& entry,
                               const std::string& request, const std::string& variant, const std::string& what,
                               bool hung, const WorkerEnv& env) {
  Worker alone(launch.native_argv, env, launch.greeting);
  std::string reply, why;
  const Worker::Outcome again = alone.ask(request, o.timeout, &reply, &why, &g_stop);
  if (again == Worker::Outcome::Died && alone.last_note() == "native")
    return native_crashed(entry, variant, "crashed on this call (the worker " + why + ")");
  if (again == Worker::Outcome::TimedOut && alone.last_note() == "native")
    return describe(entry, variant, Status::Invalid, "native hung on this call (" + why + "): a harness defect");
  return describe(entry, variant, hung ? Status::Timeout : Status::Crashed,
                  "the reference worker " + what + " while native ran there beside the kernel's process; native "
                  "alone does not: charged to the kernel");
}

// One case, asked of `worker` (started when there is none); nullopt when interrupted.
std::optional<CaseResult> run_one(const Options& o, const Setup& s, size_t i, std::unique_ptr<Worker>& worker,
                                  const Launch& launch, const WorkerEnv& env, Readiness& ready) {
  const auto& entry = s.trace.ops[s.cases[i].entry];
  const std::string& variant = s.cases[i].variant;
  if (auto problem = s.problem_for(entry.op)) return describe(entry, variant, problem->status, problem->message);
  const auto start = std::chrono::steady_clock::now();
  if (!worker) worker = std::make_unique<Worker>(launch.argv, env, launch.greeting);
  std::string reply, why;
  CaseResult r;
  const std::string request = std::to_string(s.cases[i].entry) + " " + variant;
  const Worker::Outcome outcome = worker->ask(request, o.timeout, &reply, &why, &g_stop);
  ready.take(worker->ready_info());
  const bool native_ran = worker->last_note() == "native";
  switch (outcome) {
    case Worker::Outcome::Reply: try { r = case_from_json_line(reply);
      } catch (const std::invalid_argument& e) {  // (a worker of this build always sends JSON)
        r = describe(entry, variant, Status::Crashed, std::string("the worker's reply was not a result: ") + e.what());
        worker.reset();
      }
      break;
    case Worker::Outcome::Died:
      worker.reset();
      r = !native_ran     ? describe(entry, variant, Status::Crashed, "the worker " + why + " (beside the kernel's process)")
          : !s.has_backend ? native_crashed(entry, variant, "crashed on this call (the worker " + why + ")")
                           : native_failed_again(o, launch, entry, request, variant, "died (" + why + ")", false, env);
      break;
    case Worker::Outcome::TimedOut:
      worker.reset();
      // (not a variant's skip like a crash: native may only be slower than --timeout allows)
      r = !native_ran      ? describe(entry, variant, Status::Timeout, why)
          : !s.has_backend ? describe(entry, variant, Status::Invalid, "native hung on this call (" + why + "): a harness defect")
                           : native_failed_again(o, launch, entry, request, variant, "hung (" + why + ")", true, env);
      break;
    case Worker::Outcome::Interrupted: worker.reset(); return std::nullopt;
  }
  if (g_stop) return std::nullopt;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace

void stop_on_signals() {
  struct sigaction a {};
  a.sa_handler = on_stop_signal;  // no SA_RESTART: a worker's poll wakes at once
  sigemptyset(&a.sa_mask);
  ::sigaction(SIGINT, &a, nullptr);
  ::sigaction(SIGTERM, &a, nullptr);
}

Report run_all(const Options& o, const Setup& s, const Launch& launch, const std::vector<WorkerEnv>& slots,
               std::vector<size_t>* positions) {
  Report report;
  ReportMeta& m = report.meta;
  m.tool = std::string("bbreplay ") + BB_VERSION;
  m.trace = o.trace;
  m.backend = s.has_backend ? s.backend.dir : "native (self-check: native against native)";
  m.device = s.run.device.str();
  m.torch = BB_TORCH_VERSION;
  m.date = trace::utc_now();
  m.timing = timing_method(s.run);
  m.seed = s.run.seed;
  m.seed_source = o.seed ? "--seed" : "a secret drawn from the OS for this run (--seed " + std::to_string(s.run.seed) +
                                          " reproduces it)";
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
  Progress progress(s.cases.size(), o.quiet, o.progress_every);
  Readiness ready;
  auto serve = [&](const WorkerEnv& env) {
    std::unique_ptr<Worker> worker;
    for (size_t i; !g_stop && (i = next++) < s.cases.size();) {
      {
        std::lock_guard<std::mutex> lock(shown);
        progress.at(done, s.trace.ops[s.cases[i].entry].op);
      }
      try {
        results[i] = run_one(o, s, i, worker, launch, env, ready);
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
  for (const std::string& i : ready.isolation) m.isolation += (m.isolation.empty() ? "" : "; ") + i;
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

}  // namespace bb::replay::app
