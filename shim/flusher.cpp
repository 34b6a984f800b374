#include "shim/flusher.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "shim/signals.h"
#include "tracer/log.h"
#include "tracer/observer.h"

namespace bb::shim {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
// A crash: the trace is written (by the flusher thread: this one may hold any lock) before the
// signal goes on to the program's handler or its default action, as crash_guard.cpp hands it on.
constexpr int kFatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxSignal = 65;

constexpr int kAckTimeoutMs = 3000;
constexpr int kFirstWriteMs = 1000;

int g_pipe[2] = {-1, -1};  // handler -> flusher: signal numbers
int g_ack[2] = {-1, -1};   // flusher -> handler: "written"

WriteFn* g_write = nullptr;  // never freed: the thread outlives static destruction
double g_interval = 0;
pthread_t g_thread;
std::atomic<bool> g_running{false};
constexpr unsigned char kStop = 0;  // on the request pipe: end the thread (signals are 1..64)
struct sigaction g_previous[kMaxSignal];
std::atomic<bool> g_installed[kMaxSignal];
std::atomic<bool> g_pending[kMaxSignal];

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

bool kills_by_default(const struct sigaction& sa) { return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL; }

// Dies of `sig` the way the process would have without us.
void die_of(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::kill(::getpid(), sig);
}

// Asks the flusher for a write and waits (bounded) until it is on disk. Only async-signal-safe calls.
void write_and_wait(int sig) {
  unsigned char byte;
  while (::read(g_ack[0], &byte, 1) == 1) {
  }  // drop stale acks
  byte = static_cast<unsigned char>(sig);
  if (::write(g_pipe[1], &byte, 1) != 1) return;
  pollfd p{g_ack[0], POLLIN, 0};
  if (::poll(&p, 1, kAckTimeoutMs) == 1) {
    ssize_t ignored = ::read(g_ack[0], &byte, 1);
    (void)ignored;
  }
}

// Runs on the thread the signal interrupted: the program does not go on (nor die, nor see the signal
// in its own handler) until the trace is written, or kAckTimeoutMs passed.
void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const bool again = g_pending[sig].exchange(true);
  if (!again && g_running.load()) write_and_wait(sig);
  if (kills_by_default(g_previous[sig])) die_of(sig);
  call_previous_handler(g_previous[sig], sig, info, context);
  g_pending[sig].store(false);
  errno = saved_errno;
}

// A fatal signal: the trace written once (a program's own SIGSEGV handler may see many), then the
// signal handed back. Skipped on the flusher thread itself, which would wait for itself.
std::atomic<bool> g_crash_written{false};
void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (g_running.load() && !pthread_equal(pthread_self(), g_thread) && !g_crash_written.exchange(true))
    write_and_wait(sig);
  ::sigaction(sig, &g_previous[sig], nullptr);
  errno = saved_errno;
  if (!call_previous_handler(g_previous[sig], sig, info, context) && (sig == SIGABRT || info->si_code <= 0))
    ::raise(sig);  // sent, not a fault: returning would not repeat it
  // A fault (SEGV, BUS, FPE, ILL) repeats when the handler returns, now with the previous action.
}

void handle_signal_request(int sig) {
  (*g_write)(std::string("signal ") + signal_name(sig), kills_by_default(g_previous[sig]));
  unsigned char byte = 1;
  ssize_t ignored = ::write(g_ack[1], &byte, 1);
  (void)ignored;
}

void* flusher_main(void*) {
  const int timeout_ms = g_interval > 0 ? static_cast<int>(g_interval * 1000) : -1;
  // Every second until a file is on disk: a program that ends by os._exit (no exit hook) soon after
  // its first ops still leaves one.
  bool on_disk = false;
  for (;;) {
    pollfd p{g_pipe[0], POLLIN, 0};
    int r = ::poll(&p, 1, on_disk || timeout_ms < 0 ? timeout_ms : std::min(timeout_ms, kFirstWriteMs));
    if (r < 0) {
      if (errno == EINTR) continue;
      return nullptr;
    }
    if (r == 0) {
      on_disk = (*g_write)("running", false) || on_disk;
      continue;
    }
    unsigned char sig = 0;
    if (::read(g_pipe[0], &sig, 1) != 1) continue;
    if (sig == kStop) return nullptr;
    if (sig < kMaxSignal) handle_signal_request(sig);
  }
}

bool spawn() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread inherits a mask that blocks everything
  int rc = pthread_create(&g_thread, nullptr, &flusher_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) return false;
  pthread_setname_np(g_thread, "bbshim-flush");
  g_running.store(true);
  return true;
}

void restart_after_fork() {
  if (!g_running.load() && !spawn()) log::warn("cannot restart the background writer after fork");
}

// No thread of ours exists while the program forks: the child cannot inherit a lock it holds, and
// Python (>= 3.12) does not warn that the process was multi-threaded because of us. The thread
// comes back on the parent's next op call.
void stop_before_fork() {
  if (!g_running.load()) return;
  unsigned char stop = kStop;
  if (::write(g_pipe[1], &stop, 1) != 1) return;
  pthread_join(g_thread, nullptr);
  g_running.store(false);
}

void restart_in_parent() {
  if (g_write) tracer::run_on_next_op(&restart_after_fork);
}

}  // namespace

bool start_flusher(WriteFn write, double interval_s) {
  // Writers never block; the flusher blocks in poll, the handler polls with a timeout.
  if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || ::pipe2(g_ack, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  g_write = new WriteFn(std::move(write));
  g_interval = interval_s;
  if (!spawn()) return false;
  pthread_atfork(&stop_before_fork, &restart_in_parent, nullptr);
  return true;
}

void install_signal_handlers() {
  for (int sig : kSignals) {
    if (::sigaction(sig, nullptr, &g_previous[sig]) != 0) continue;
    // An ignored signal stays ignored (nohup'd programs keep ignoring SIGHUP).
    if (!(g_previous[sig].sa_flags & SA_SIGINFO) && g_previous[sig].sa_handler == SIG_IGN) continue;
    if (install_handler(sig, &on_signal, SA_RESTART, nullptr)) g_installed[sig] = true;
  }
  for (int sig : kFatal) {
    if (::sigaction(sig, nullptr, &g_previous[sig]) != 0) continue;
    if (!(g_previous[sig].sa_flags & SA_SIGINFO) && g_previous[sig].sa_handler == SIG_IGN) continue;
    if (install_handler(sig, &on_fatal_signal, SA_ONSTACK, nullptr)) g_installed[sig] = true;
  }
}

void restore_signal_handlers() {
  for (int sig : kSignals)
    if (g_installed[sig].exchange(false)) ::sigaction(sig, &g_previous[sig], nullptr);
  for (int sig : kFatal)
    if (g_installed[sig].exchange(false)) ::sigaction(sig, &g_previous[sig], nullptr);
}

}  // namespace bb::shim
