// One worker process at a time, asked one question at a time, with a deadline: a kernel that
// crashes, corrupts its device context or hangs takes down only its worker, and the caller goes on
// with a fresh one. Each worker leads a process group of its own, killed whole when the worker ends:
// what a kernel forked neither outlives it nor, by holding the pipe open, hides its death.
//
// The protocol: the worker's first line on stdin is a token, random for each worker; every line it
// sends back starts with it ("<token> <reply>", notes "@<token> <note>"). Anything else on the pipe
// — what a kernel writes to file descriptors it finds — is ignored: a kernel can neither forge a
// result nor charge its crash to native.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace bb::replay {

// The worker side of the protocol.
std::string reply_prefix(const std::string& token);  // "<token> "
std::string note_prefix(const std::string& token);   // "@<token> "

class Worker {
 public:
  // Starts `argv` with pipes on its stdin and stdout (its stderr is ours), in our environment with
  // `env`'s variables set to its values. Its first line is the token, then ` ` and `greeting` if given
  // (bbreplay's reference workers get the run's secret seed so, never on their command line).
  explicit Worker(const std::vector<std::string>& argv,
                  const std::vector<std::pair<std::string, std::string>>& env = {}, const std::string& greeting = "");
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  enum class Outcome { Reply, Died, TimedOut, Interrupted };
  // Sends `request` (one line) and waits up to `timeout_s` for one line back. Notes before it say what
  // the worker is doing ("native", "kernel"): the last one is kept (last_note). The note "ready" says
  // that a new worker has set itself up: until then (up to kStartupSeconds more) the clock of the
  // first request does not run, so that a slow start on a busy machine is no case's timeout. On Died, `why` says how (signal or exit status); a worker that closes its end of the
  // pipe and lives on is given 5 s to exit, then killed. Interrupted: `*stop` became non-zero while
  // waiting (checked at least once a second, and at once when a signal arrives); the worker is killed.
  // After anything but Reply the worker is finished and a new one must be started.
  Outcome ask(const std::string& request, double timeout_s, std::string* reply, std::string* why,
              const volatile std::sig_atomic_t* stop = nullptr);
  static constexpr double kStartupSeconds = 600;
  // The last note of the current or last request ("" when none).
  const std::string& last_note() const { return note_; }
  // What the worker's "ready" note said after the word (""; or none yet).
  const std::string& ready_info() const { return ready_info_; }

 private:
  void kill_all();
  bool ended() const;  // the worker exited or was killed (not reaped yet)
  std::string reap();  // kills its process group, waits for the worker, says how it ended
  std::string reap_within(double seconds);

  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string token_;
  bool ready_ = false;
  std::string buffer_;
  std::string note_;
  std::string ready_info_;
};

}  // namespace bb::replay
