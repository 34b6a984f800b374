#include "shim/config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tracer/yaml_read.h"

namespace bb::shim {
namespace {

bool truthy(const char* v) {
  return v && *v && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0 && std::strcmp(v, "off") != 0 &&
         std::strcmp(v, "no") != 0;
}

// "ON/PERIOD" in milliseconds, 0 < ON < PERIOD <= 60000; "off" or "0": every call. Empty on success,
// else what is wrong (and `c` is left as it was).
std::string parse_sampling(const std::string& v, Config& c) {
  if (v == "off" || v == "0") {
    c.sample_on_ms = c.sample_period_ms = 0;
    return "";
  }
  unsigned on = 0, period = 0;
  char extra = 0;
  if (std::sscanf(v.c_str(), "%u/%u%c", &on, &period, &extra) != 2 || on == 0 || on >= period || period > 60000)
    return "is not ON/PERIOD in milliseconds with 0 < ON < PERIOD <= 60000 (e.g. 10/100), or off";
  c.sample_on_ms = on;
  c.sample_period_ms = period;
  return "";
}

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

void read_config_file(const std::string& file, Config& c) {
  yaml::Reader r(file);
  YAML::Node root = r.load_file();
  if (root.IsNull()) return;
  if (!root.IsMap()) r.fail(root, "expected a map of settings");
  r.only_keys(root, {"disable", "trace", "log", "flush_seconds", "max_signatures", "int_ranges", "device_time",
                     "device_time_sample", "timeline", "timeline_max_events", "backend", "policy", "summary"});
  c.disabled = r.optional<bool>(root, "disable", c.disabled, "true or false");
  if (YAML::Node t = root["trace"]) {
    if (t.IsScalar() && (t.Scalar() == "off" || t.Scalar() == "false")) {
      c.trace = false;
    } else {
      c.trace_path = r.path(t, "a trace file path, or off");
    }
  }
  if (YAML::Node l = root["log"]) {
    const auto v = r.scalar<std::string>(l, "off, warn, info or debug");
    if (v != "off" && v != "warn" && v != "info" && v != "debug") r.fail(l, "log must be off, warn, info or debug");
    c.log_level = log::parse_level(v.c_str());
  }
  c.flush_seconds = r.optional<double>(root, "flush_seconds", c.flush_seconds, "a number of seconds");
  if (c.flush_seconds < 0) r.fail(root["flush_seconds"], "flush_seconds must not be negative");
  c.max_signatures = r.optional<size_t>(root, "max_signatures", c.max_signatures, "a positive integer");
  if (c.max_signatures == 0) r.fail(root["max_signatures"], "max_signatures must be positive");
  c.int_ranges = r.optional<bool>(root, "int_ranges", c.int_ranges, "true or false");
  c.device_time = r.optional<bool>(root, "device_time", c.device_time, "true or false");
  if (YAML::Node s = root["device_time_sample"]) {
    const std::string v = r.scalar<std::string>(s, "ON/PERIOD in milliseconds, or off");
    if (std::string why = parse_sampling(v, c); !why.empty()) r.fail(s, "device_time_sample '" + v + "' " + why);
  }
  if (YAML::Node t = root["timeline"]) c.timeline = r.path(t, "a timeline file path");
  c.timeline_max_events =
      r.optional<size_t>(root, "timeline_max_events", c.timeline_max_events, "a positive integer");
  if (c.timeline_max_events == 0) r.fail(root["timeline_max_events"], "timeline_max_events must be positive");
  if (YAML::Node b = root["backend"]) c.backend = r.path(b, "a backend folder");
  if (YAML::Node s = root["summary"]) c.summary = r.path(s, "a file path");
  if (YAML::Node p = root["policy"]) {
    if (p.IsMap()) {  // written inline: parsed (with its own checks) when routing starts
      c.policy = file;
      c.policy_section = "policy";
    } else {
      c.policy = r.path(p, "a policy file path, or the policy itself (a map)");
    }
  }
}

}  // namespace

Config config_from_env(const Getenv& getenv) {
  Config c;
  if (const char* file = getenv("BB_CONFIG"); file && *file) {
    Config from_file;
    try {
      read_config_file(file, from_file);
      c = from_file;
    } catch (const trace::FormatError& e) {
      c.problems.push_back(std::string("config error: ") + e.what() + "; the file is ignored");
    }
  }
  if (const char* v = getenv("BB_DISABLE"); v && *v) c.disabled = truthy(v);
  if (const char* v = getenv("BB_LOG"); v && *v) {
    c.log_level = log::parse_level(v);
    if (c.log_level == log::Level::Warn && std::strcmp(v, "warn") && std::strcmp(v, "1"))
      c.problems.push_back(std::string("BB_LOG='") + v + "' is not off|warn|info|debug; using warn");
  }
  if (const char* v = getenv("BB_TRACE"); v && *v) {
    if (!std::strcmp(v, "off") || !std::strcmp(v, "0")) {
      c.trace = false;
    } else {
      c.trace = true;
      c.trace_path = v;
    }
  }
  read_number<double>(getenv, "BB_FLUSH_SECONDS", 0.0, 86400.0, c.flush_seconds, c);
  read_number<size_t>(getenv, "BB_MAX_SIGNATURES", 1, 100000000, c.max_signatures, c);
  if (const char* v = getenv("BB_INT_RANGES"); v && *v) c.int_ranges = truthy(v);
  if (const char* v = getenv("BB_DEVICE_TIME"); v && *v) c.device_time = truthy(v);
  if (const char* v = getenv("BB_DEVICE_TIME_SAMPLE"); v && *v) {
    if (std::string why = parse_sampling(v, c); !why.empty()) {
      c.problems.push_back(std::string("BB_DEVICE_TIME_SAMPLE='") + v + "' " + why + "; timing every call");
      c.sample_on_ms = c.sample_period_ms = 0;
    }
  }
  if (const char* v = getenv("BB_TIMELINE"); v && *v) c.timeline = v;
  read_number<size_t>(getenv, "BB_TIMELINE_MAX_EVENTS", 1, 1000000000, c.timeline_max_events, c);
  if (const char* v = getenv("BB_BACKEND"); v && *v) c.backend = v;
  if (const char* v = getenv("BB_POLICY"); v && *v) {
    c.policy = v;
    c.policy_section.clear();
  }
  if (const char* v = getenv("BB_SUMMARY"); v && *v) c.summary = v;
  return c;
}

}  // namespace bb::shim
