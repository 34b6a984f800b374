// The preload's mutable state lives in a few objects, each owned by one part and reached through one
// accessor (docs/architecture.md, "Process state"). An object that a hot path (the per-op callback),
// a signal handler or an exit handler reaches is made by process_state<T>(): constant-initialized, so
// that its accessor costs neither an initialization guard nor an indirection and is async-signal-safe,
// and never destroyed (trivially destructible), so that threads and exit handlers still find it after
// static destructors ran: the preload runs inside someone else's process, which may end in any order.
// What needs a constructor (strings, containers) is a heap object made when its part starts and never
// freed, reached the same way.
#pragma once

#include <type_traits>

// The compiler checks that a variable is constant-initialized (C++20's constinit).
#if defined(__clang__)
#define BB_CONSTINIT [[clang::require_constant_initialization]]
#elif defined(__GNUC__) && __GNUC__ >= 10
#define BB_CONSTINIT __constinit
#else
#define BB_CONSTINIT
#endif

namespace bb {

// The process's one T (a type of a single .cpp file's anonymous namespace), from the library's load to
// the process's end.
template <class T>
T& process_state() {
  static_assert(std::is_trivially_destructible_v<T>, "process state is never destroyed: threads use it at exit");
  BB_CONSTINIT static T state;
  return state;
}

}  // namespace bb
