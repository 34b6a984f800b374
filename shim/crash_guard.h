// A crash inside a generated kernel says which op and which backend file were running, with a stack
// trace, before the process dies as it would have (the program's own handler, if any, still runs).
#pragma once

#include <string>

namespace bb::shim {

// Marks this thread as running a generated kernel for the lifetime of the object.
class CrashContext {
 public:
  CrashContext(const std::string& op, const std::string& file);
  ~CrashContext();
  CrashContext(const CrashContext&) = delete;
  CrashContext& operator=(const CrashContext&) = delete;

  const CrashContext* const outer;
  const std::string& op;  // owned by the route: outlives the context
  const std::string& file;
};

// SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT. Once per process.
void install_crash_guard();

}  // namespace bb::shim
