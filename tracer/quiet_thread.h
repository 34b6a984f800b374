// A background thread of the preload's own, which no signal is delivered to (the program's handlers
// stay on its threads).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <string>
#include <system_error>
#include <thread>

#include "tracer/log.h"

namespace bb::tracer {

// Runs fn on a detached thread with every signal blocked. An exception escaping fn (a bug of ours)
// would end the program (std::terminate): on_error(what it says) runs instead, and the thread ends.
// If the thread cannot start, says once what (`what`) and what follows (`then`), and returns false.
template <typename Fn, typename OnError>
bool start_quiet_thread(Fn fn, OnError on_error, const char* what, const char* then) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  bool started = true;
  try {
    std::thread([fn = std::move(fn), on_error = std::move(on_error)]() mutable noexcept {
      try {
        fn();
      } catch (...) {
        try {
          on_error(log::current_exception_text());
        } catch (...) {
        }
      }
    }).detach();
  } catch (const std::system_error& e) {
    log::warn(std::string(what) + ": cannot start its thread (" + e.what() + "); " + then);
    started = false;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return started;
}

}  // namespace bb::tracer
