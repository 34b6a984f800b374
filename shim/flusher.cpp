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
#include "tracer/process_state.h"

namespace bb::shim {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
// A crash: the trace is written (by the flusher thread: this one may hold any lock) before the
// signal goes on to the program's handler or its default action, as crash_guard.cpp hands it on.
constexpr int kFatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxSignal = 65;

constexpr int kAckTimeoutMs = 3000;
constexpr int kFirstWriteMs = 1000;

constexpr unsigned char kStop = 0;  // on the request pipe: end the thread (signals are 1..64)

// The flusher's process state: its thread and the pipes to it, and the signal handlers that ask it
// for a write. From the library's load to the process's end (process_state.h: the signal handlers
// read it with async-signal-safe loads only, no initialization guard; the thread outlives static
// destruction). Reached through flusher() only.
struct Flusher {
  int pipe[2] = {-1, -1};    // handler -> flusher: signal numbers
  int ack[2] = {-1, -1};     // flusher -> handler: "written"
  WriteFn* write = nullptr;  // never freed: the thread outlives static destruction
  double interval = 0;
  pthread_t thread{};
  std::atomic<bool> running{false};
  // Per signal: the action before ours, whether ours is installed, a write under way for it.
  struct sigaction previous[kMaxSignal] = {};
  std::atomic<bool> installed[kMaxSignal] = {};
  std::atomic<bool> pending[kMaxSignal] = {};
  std::atomic<bool> crash_written{false};  // a fatal signal's write was asked for (once)
};

Flusher& flusher() { return process_state<Flusher>(); }

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
  Flusher& f = flusher();
  unsigned char byte;
  while (::read(f.ack[0], &byte, 1) == 1) {
  }  // drop stale acks
  byte = static_cast<unsigned char>(sig);
  if (::write(f.pipe[1], &byte, 1) != 1) return;
  pollfd p{f.ack[0], POLLIN, 0};
  if (::poll(&p, 1, kAckTimeoutMs) == 1) {
    ssize_t ignored = ::read(f.ack[0], &byte, 1);
    (void)ignored;
  }
}

// SIGINT, SIGTERM, SIGHUP's handler (sigaction's). Runs on the thread the signal interrupted: the
// program does not go on (nor die, nor see the signal in its own handler) until the trace is
// written, or kAckTimeoutMs passed.
void on_signal(int sig, siginfo_t* info, void* context) {
  Flusher& f = flusher();
  const int saved_errno = errno;
  const bool again = f.pending[sig].exchange(true);
  if (!again && f.running.load()) write_and_wait(sig);
  if (kills_by_default(f.previous[sig])) die_of(sig);
  call_previous_handler(f.previous[sig], sig, info, context);
  f.pending[sig].store(false);
  errno = saved_errno;
}

// A fatal signal's handler (sigaction's): the trace written once (a program's own SIGSEGV handler
// may see many), then the signal handed back. Skipped on the flusher thread itself, which would wait
// for itself.
void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  Flusher& f = flusher();
  const int saved_errno = errno;
  if (f.running.load() && !pthread_equal(pthread_self(), f.thread) && !f.crash_written.exchange(true))
    write_and_wait(sig);
  ::sigaction(sig, &f.previous[sig], nullptr);
  errno = saved_errno;
  if (!call_previous_handler(f.previous[sig], sig, info, context) && (sig == SIGABRT || info->si_code <= 0))
    ::raise(sig);  // sent, not a fault: returning would not repeat it
  // A fault (SEGV, BUS, FPE, ILL) repeats when the handler returns, now with the previous action.
}

void handle_signal_request(Flusher& f, int sig) {
  (*f.write)(std::string("signal ") + signal_name(sig), kills_by_default(f.previous[sig]));
  unsigned char byte = 1;
  ssize_t ignored = ::write(f.ack[1], &byte, 1);
  (void)ignored;
}

// The thread's body (pthread_create's).
void* flusher_main(void*) {
  Flusher& f = flusher();
  const int timeout_ms = f.interval > 0 ? static_cast<int>(f.interval * 1000) : -1;
  // Every second until a file is on disk: a program that ends by os._exit (no exit hook) soon after
  // its first ops still leaves one.
  bool on_disk = false;
  for (;;) {
    pollfd p{f.pipe[0], POLLIN, 0};
    int r = ::poll(&p, 1, on_disk || timeout_ms < 0 ? timeout_ms : std::min(timeout_ms, kFirstWriteMs));
    if (r < 0) {
      if (errno == EINTR) continue;
      return nullptr;
    }
    if (r == 0) {
      on_disk = (*f.write)("running", false) || on_disk;
      continue;
    }
    unsigned char sig = 0;
    if (::read(f.pipe[0], &sig, 1) != 1) continue;
    if (sig == kStop) return nullptr;
    if (sig < kMaxSignal) handle_signal_request(f, sig);
  }
}

bool spawn() {
  Flusher& f = flusher();
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread inherits a mask that blocks everything
  int rc = pthread_create(&f.thread, nullptr, &flusher_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) return false;
  pthread_setname_np(f.thread, "bbshim-flush");
  f.running.store(true);
  return true;
}

// run_on_next_op's task (a plain function pointer), in the parent after a fork.
void restart_after_fork() {
  if (!flusher().running.load() && !spawn()) log::warn("cannot restart the background writer after fork");
}

// No thread of ours exists while the program forks: the child cannot inherit a lock it holds, and
// Python (>= 3.12) does not warn that the process was multi-threaded because of us. The thread
// comes back on the parent's next op call. pthread_atfork's prepare handler.
void stop_before_fork() {
  Flusher& f = flusher();
  if (!f.running.load()) return;
  unsigned char stop = kStop;
  if (::write(f.pipe[1], &stop, 1) != 1) return;
  pthread_join(f.thread, nullptr);
  f.running.store(false);
}

// pthread_atfork's parent handler.
void restart_in_parent() {
  if (flusher().write) tracer::run_on_next_op(&restart_after_fork);
}

}  // namespace

bool start_flusher(WriteFn write, double interval_s) {
  Flusher& f = flusher();
  // Writers never block; the flusher blocks in poll, the handler polls with a timeout.
  if (::pipe2(f.pipe, O_CLOEXEC | O_NONBLOCK) != 0 || ::pipe2(f.ack, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  f.write = new WriteFn(std::move(write));
  f.interval = interval_s;
  if (!spawn()) return false;
  pthread_atfork(&stop_before_fork, &restart_in_parent, nullptr);
  return true;
}

void install_signal_handlers() {
  Flusher& f = flusher();
  for (int sig : kSignals) {
    if (::sigaction(sig, nullptr, &f.previous[sig]) != 0) continue;
    // An ignored signal stays ignored (nohup'd programs keep ignoring SIGHUP).
    if (!(f.previous[sig].sa_flags & SA_SIGINFO) && f.previous[sig].sa_handler == SIG_IGN) continue;
    if (install_handler(sig, &on_signal, SA_RESTART, nullptr)) f.installed[sig] = true;
  }
  for (int sig : kFatal) {
    if (::sigaction(sig, nullptr, &f.previous[sig]) != 0) continue;
    if (!(f.previous[sig].sa_flags & SA_SIGINFO) && f.previous[sig].sa_handler == SIG_IGN) continue;
    if (install_handler(sig, &on_fatal_signal, SA_ONSTACK, nullptr)) f.installed[sig] = true;
  }
}

void restore_signal_handlers() {
  Flusher& f = flusher();
  for (int sig : kSignals)
    if (f.installed[sig].exchange(false)) ::sigaction(sig, &f.previous[sig], nullptr);
  for (int sig : kFatal)
    if (f.installed[sig].exchange(false)) ::sigaction(sig, &f.previous[sig], nullptr);
}

}  // namespace bb::shim
