#include "replay/workers/worker_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <iomanip>
#include <random>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace bb::replay {

std::string reply_prefix(const std::string& token) { return token + " "; }
std::string note_prefix(const std::string& token) { return "@" + token + " "; }

namespace {

std::string random_token() {
  std::random_device random;
  std::ostringstream s;
  for (int i = 0; i < 4; ++i) s << std::hex << std::setw(8) << std::setfill('0') << random();
  return s.str();
}

}  // namespace

Worker::Worker(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
               const std::string& greeting) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead worker must not take us down when we write to it
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  std::vector<std::string> vars;  // ours, with env's names replaced
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    bool replaced = false;
    for (const auto& [name, value] : env) replaced = replaced || var.rfind(name + "=", 0) == 0;
    if (!replaced) vars.push_back(var);
  }
  for (const auto& [name, value] : env) vars.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  // A process group of its own: whatever a kernel forks is killed with its worker.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  int rc = posix_spawn(&pid_, ptrs[0], &actions, &attr, ptrs.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  to_ = in[1];
  from_ = out[0];
  if (rc != 0) throw std::runtime_error(std::string("cannot start a worker: ") + strerror(rc));
  token_ = random_token();
  const std::string first = token_ + (greeting.empty() ? "" : " " + greeting) + "\n";
  if (::write(to_, first.data(), first.size()) != static_cast<ssize_t>(first.size())) {
    // (it died at once: the first ask finds out how)
  }
}

Worker::~Worker() {
  if (pid_ > 0) {
    kill_all();
    reap();
  }
  if (to_ >= 0) ::close(to_);
  if (from_ >= 0) ::close(from_);
}

namespace {

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status))
    return std::string("died of ") + sigabbrev_np(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

// The worker and everything in its process group (what a kernel forked). Called while the worker is
// not yet reaped, so that its group id cannot have been reused.
void Worker::kill_all() {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

bool Worker::ended() const {
  siginfo_t info{};
  return pid_ > 0 && ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid_;
}

std::string Worker::reap() {
  kill_all();  // (children of an ended worker: nothing of it may outlive it)
  int status = 0;
  pid_t r;
  do r = pid_ > 0 ? ::waitpid(pid_, &status, 0) : -1;
  while (r < 0 && errno == EINTR);
  if (r != pid_) return "lost";
  pid_ = -1;
  return how_it_ended(status);
}

// Waits up to `seconds` for the worker to exit by itself, then kills it: a worker that closed its pipe
// and went on running must not hang the replay.
std::string Worker::reap_within(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (pid_ > 0 && std::chrono::steady_clock::now() < until) {
    if (ended()) return reap();
    ::usleep(10000);
  }
  if (pid_ <= 0) return "lost";
  reap();
  return "closed its result pipe and did not exit; it was killed";
}

Worker::Outcome Worker::ask(const std::string& request, double timeout_s, std::string* reply, std::string* why,
                            const volatile std::sig_atomic_t* stop) {
  const std::string line = request + "\n";
  if (::write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    *why = reap();
    return Outcome::Died;
  }
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s + (ready_ ? 0 : kStartupSeconds));
  note_.clear();
  const std::string notes = note_prefix(token_), replies = reply_prefix(token_);
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (line.rfind(notes, 0) == 0) {
        const std::string note = line.substr(notes.size());
        if ((note == "ready" || note.rfind("ready ", 0) == 0) && !ready_) {  // the request's own clock starts now
          ready_ = true;
          ready_info_ = note.size() > 6 ? note.substr(6) : "";
          deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        } else {
          note_ = note;
        }
      } else if (line.rfind(replies, 0) == 0) {
        *reply = line.substr(replies.size());
        return Outcome::Reply;
      }  // (anything else is not the worker's: ignored)
      continue;
    }
    if (stop && *stop) {
      reap();
      *why = "interrupted";
      return Outcome::Interrupted;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      reap();
      *why = "no result within " + std::to_string(static_cast<int>(timeout_s)) + " s; the worker was killed";
      return Outcome::TimedOut;
    }
    pollfd p{from_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long>(left.count(), 200)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && ended()) {  // nothing to read, and the worker is gone (what it forked may hold the pipe)
      *why = reap();
      return Outcome::Died;
    }
    if (r <= 0) continue;
    char buf[65536];
    ssize_t n = ::read(from_, buf, sizeof buf);
    if (n <= 0) {
      *why = reap_within(5);
      return Outcome::Died;
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace bb::replay
