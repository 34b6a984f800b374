// Small pieces shared by the preload's signal handlers (flusher.cpp, crash_guard.cpp).
#pragma once

#include <signal.h>

namespace bb::shim {

// Calls the handler that `prev` describes, if it is a function (not SIG_DFL or SIG_IGN); returns
// whether it did. Async-signal-safe.
bool call_previous_handler(const struct sigaction& prev, int sig, siginfo_t* info, void* context);

// Installs `handler` (SA_SIGINFO | flags) for `sig`, storing what was there in `previous`.
bool install_handler(int sig, void (*handler)(int, siginfo_t*, void*), int flags, struct sigaction* previous);

}  // namespace bb::shim
