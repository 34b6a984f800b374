#include "shim/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace bb::shim {
namespace {

bool truthy(const char* v) { return v && *v && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0; }

template <class T>
void read_number(const Getenv& getenv, const char* name, T min, T max, T& out, Config& c) {
  const char* v = getenv(name);
  if (!v || !*v) return;
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v, &end);
  if (errno || *end || d < static_cast<double>(min) || d > static_cast<double>(max)) {
    c.problems.push_back(std::string(name) + "='" + v + "' is not a number in [" + std::to_string(min) +
                         ", " + std::to_string(max) + "]; using " + std::to_string(out));
    return;
  }
  out = static_cast<T>(d);
}

}  // namespace

Config config_from_env(const Getenv& getenv) {
  Config c;
  c.disabled = truthy(getenv("BB_DISABLE"));
  c.log_level = log::parse_level(getenv("BB_LOG"));
  if (const char* v = getenv("BB_LOG"); v && *v && log::parse_level(v) == log::Level::Warn &&
                                        std::strcmp(v, "warn") && std::strcmp(v, "1"))
    c.problems.push_back(std::string("BB_LOG='") + v + "' is not off|warn|info|debug; using warn");
  if (const char* v = getenv("BB_TRACE"); v && *v) {
    if (!std::strcmp(v, "off") || !std::strcmp(v, "0")) {
      c.trace = false;
    } else {
      c.trace_path = v;
    }
  }
  read_number<double>(getenv, "BB_FLUSH_SECONDS", 0.0, 86400.0, c.flush_seconds, c);
  read_number<size_t>(getenv, "BB_MAX_SIGNATURES", 1, 100000000, c.max_signatures, c);
  if (const char* v = getenv("BB_INT_RANGES"); v && *v) c.int_ranges = truthy(v);
  if (const char* v = getenv("BB_BACKEND")) c.backend = v;
  if (const char* v = getenv("BB_POLICY")) c.policy = v;
  if (const char* v = getenv("BB_SUMMARY")) c.summary = v;
  return c;
}

}  // namespace bb::shim
