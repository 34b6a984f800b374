#include "tracer/log.h"

#include <unistd.h>

#include <boost/stacktrace.hpp>

#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>

#include "tracer/format/atomic_file.h"
#include "tracer/process_state.h"

namespace bb::log {
namespace {

// The log's process state: its level and the keys warned about once. From the library's load to the
// process's end (process_state.h: messages are written at exit too). Reached through state() only.
struct Log {
  std::atomic<int> level{static_cast<int>(Level::Warn)};
  std::mutex once_mu;
  std::set<std::string>* warned = nullptr;  // once_mu; made at the first warn_once, never freed
};
Log& state() { return process_state<Log>(); }

}  // namespace

void set_level(Level l) { state().level.store(static_cast<int>(l), std::memory_order_relaxed); }
Level level() { return static_cast<Level>(state().level.load(std::memory_order_relaxed)); }

Level parse_level(const char* text) {
  if (!text || !*text) return Level::Warn;
  if (!std::strcmp(text, "off") || !std::strcmp(text, "0") || !std::strcmp(text, "quiet")) return Level::Off;
  if (!std::strcmp(text, "info") || !std::strcmp(text, "2")) return Level::Info;
  if (!std::strcmp(text, "debug") || !std::strcmp(text, "3")) return Level::Debug;
  return Level::Warn;
}

bool enabled(Level l) { return static_cast<int>(l) <= state().level.load(std::memory_order_relaxed); }

void write(Level l, const std::string& message) {
  if (!enabled(l)) return;
  std::string line = "[bbshim] " + message + "\n";
  format::write_fully(STDERR_FILENO, line.data(), line.size());  // stderr closed: the message is dropped
}

std::string stacktrace() { return boost::stacktrace::to_string(boost::stacktrace::stacktrace()); }

std::string current_exception_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void warn_once(const std::string& key, const std::string& message) {
  Log& s = state();
  {
    std::lock_guard<std::mutex> lock(s.once_mu);
    if (!s.warned) s.warned = new std::set<std::string>();
    if (!s.warned->insert(key).second) return;
  }
  warn(message);
}

}  // namespace bb::log
