#include "shim/crash_guard.h"

#include <signal.h>
#include <unistd.h>

#include <boost/stacktrace.hpp>
#include <cstring>

#include "shim/signals.h"
#include "tracer/format/atomic_file.h"
#include "tracer/log.h"
#include "tracer/process_state.h"

namespace bb::shim {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// The crash guard's process state: the actions its handler hands each signal back to. Read by the
// handler (process_state.h: no initialization guard, never destroyed). Reached through crash_guard().
struct CrashGuard {
  struct sigaction previous[65] = {};
};
CrashGuard& crash_guard() { return process_state<CrashGuard>(); }

thread_local const CrashContext* t_context = nullptr;  // the innermost generated kernel running on this thread

void write_all(const char* text) { format::write_fully(STDERR_FILENO, text, std::strlen(text)); }

void report_crash(int sig) {
  const CrashContext* c = t_context;
  if (!c) return;
  t_context = nullptr;  // a crash while reporting must not report again
  write_all("[bbshim] ");
  write_all(strsignal(sig));
  write_all(" in the generated kernel for ");
  write_all(c->op.c_str());
  write_all(" (");
  write_all(c->file.c_str());
  write_all(")\n");
  // Not async-signal-safe, but the process is going down anyway; the line above is already out.
  write_all(boost::stacktrace::to_string(boost::stacktrace::stacktrace()).c_str());
}

void reinstall_previous(int sig) { ::sigaction(sig, &crash_guard().previous[sig], nullptr); }

// The fatal signals' handler (sigaction's).
void on_fatal(int sig, siginfo_t* info, void* context) {
  report_crash(sig);
  // Hand the signal back: the previous handler (Python's faulthandler, the default action) decides.
  reinstall_previous(sig);
  if (!call_previous_handler(crash_guard().previous[sig], sig, info, context) && (sig == SIGABRT || info->si_code <= 0))
    ::raise(sig);  // sent, not a fault: returning would not repeat it
  // A fault (SEGV, BUS, FPE, ILL) repeats when the handler returns, now with the previous action.
}

}  // namespace

CrashContext::CrashContext(const std::string& o, const std::string& f) : outer(t_context), op(o), file(f) {
  t_context = this;
}

CrashContext::~CrashContext() { t_context = outer; }

void install_crash_guard() {
  for (int sig : kSignals) install_handler(sig, &on_fatal, SA_ONSTACK, &crash_guard().previous[sig]);
}

}  // namespace bb::shim
