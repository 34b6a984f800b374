// A background thread that rewrites the trace periodically and when a terminating signal arrives,
// so a program that is killed still leaves a valid trace.
#pragma once

#include <functional>
#include <string>

namespace bb::shim {

// `write(status, final)` as TraceWriter::write; returns whether a trace file is on disk now.
using WriteFn = std::function<bool(const std::string& status, bool final)>;

// Starts the thread (all signals blocked in it). interval_s == 0: no periodic writes. Until the
// first periodic write has put a file on disk it tries every second (at most interval_s), so that a
// program ending by os._exit (which runs no exit hook) soon after its first ops leaves a trace.
bool start_flusher(WriteFn write, double interval_s);

// SIGINT, SIGTERM, SIGHUP: the handler has the flusher thread write the trace and waits for it (at
// most 3 s), then does what would have happened without us: calls the program's own handler
// (Python's SIGINT), or lets the signal kill the process with its usual exit status. A second signal
// of the same kind while the write is under way skips the wait.
void install_signal_handlers();

// SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT: the same bounded write, once, then the signal goes on to
// the handler that was there before (Python's faulthandler) or its default action (the process dies
// of it, with its core dump). The write may not finish if the crashed thread holds a lock it needs
// (the allocator's): then the 3 s pass and the process dies as it would have.

// In a forked child: give the signals back to whatever handled them before.
void restore_signal_handlers();

}  // namespace bb::shim
