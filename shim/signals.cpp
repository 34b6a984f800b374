#include "shim/signals.h"

namespace bb::shim {

bool call_previous_handler(const struct sigaction& prev, int sig, siginfo_t* info, void* context) {
  if (prev.sa_flags & SA_SIGINFO) {
    if (!prev.sa_sigaction) return false;
    prev.sa_sigaction(sig, info, context);
    return true;
  }
  if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN || !prev.sa_handler) return false;
  prev.sa_handler(sig);
  return true;
}

bool install_handler(int sig, void (*handler)(int, siginfo_t*, void*), int flags, struct sigaction* previous) {
  struct sigaction sa {};
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | flags;
  sigemptyset(&sa.sa_mask);
  return ::sigaction(sig, &sa, previous) == 0;
}

}  // namespace bb::shim
