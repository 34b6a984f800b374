// The preload's only voice: one line per message on stderr, prefixed "[bbshim]", never stdout.
// Quiet unless something is wrong (warn) or the user asked (BB_LOG=info|debug).
#pragma once

#include <string>

namespace bb::log {

enum class Level { Off = 0, Warn = 1, Info = 2, Debug = 3 };

void set_level(Level level);
Level level();
// Parses BB_LOG's value: off, warn, info, debug (also 0-3). Unknown text gives Warn.
Level parse_level(const char* text);

bool enabled(Level level);
void write(Level level, const std::string& message);  // one write(2) call per line

inline void warn(const std::string& m) { write(Level::Warn, m); }
inline void info(const std::string& m) { write(Level::Info, m); }
inline void debug(const std::string& m) { write(Level::Debug, m); }

// The calling thread's stack, one frame per line (Boost.Stacktrace), for debug reports.
std::string stacktrace();

// Inside a catch block: what the exception being handled says (its what(), or that it is not a
// std::exception).
std::string current_exception_text();

// Warns the first time `key` is seen; later calls with the same key are silent.
void warn_once(const std::string& key, const std::string& message);

}  // namespace bb::log
