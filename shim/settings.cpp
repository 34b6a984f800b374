#include "shim/settings.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>

namespace bb::shim {
namespace {

// ------------------------------------------------------------------ parsers

// 1, true, on, yes / 0, false, off, no.
std::optional<bool> boolean(const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  return std::nullopt;
}
const char* const kNotBoolean = "is not 1, true, on or yes, nor 0, false, off or no";

std::string number_text(double v) {
  std::ostringstream s;
  s << std::setprecision(15) << v;  // (100000000, not 1e+08)
  return s.str();
}

// A number in [min, max]; nullopt otherwise.
std::optional<double> number(const std::string& v, double min, double max) {
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || errno || *end || !std::isfinite(d) || d < min || d > max) return std::nullopt;
  return d;
}
std::string not_a_number(double min, double max, bool integer) {
  return std::string("is not ") + (integer ? "a whole number" : "a number") + " in [" + number_text(min) + ", " +
         number_text(max) + "]";
}

// A path as written: relative ones are relative to the BB_CONFIG file's folder when they come from it.
std::string resolved(const std::string& path, const std::string& file_dir) {
  return path.empty() || path[0] == '/' ? path : file_dir + path;
}

// "ON/PERIOD" in milliseconds, 0 < ON < PERIOD <= 60000; "off" or "0": every call.
std::string read_sampling(const std::string& v, const std::string&, Config& c) {
  if (v == "off" || v == "0") {
    c.device_timing.sample_on_ms = c.device_timing.sample_period_ms = 0;
    return "";
  }
  unsigned on = 0, period = 0;
  char extra = 0;
  if (std::sscanf(v.c_str(), "%u/%u%c", &on, &period, &extra) != 2 || on == 0 || on >= period || period > 60000)
    return "is not ON/PERIOD in milliseconds with 0 < ON < PERIOD <= 60000 (e.g. 10/100), or off";
  c.device_timing.sample_on_ms = on;
  c.device_timing.sample_period_ms = period;
  return "";
}
std::string sampling_text(const Config& c) {
  const tracer::DeviceTimingOptions& t = c.device_timing;
  return t.sample_period_ms ? std::to_string(t.sample_on_ms) + "/" + std::to_string(t.sample_period_ms) : "off";
}

// first, or 1/on/...: the first calls of each signature (the default); all: every call; 0/off/...: none.
std::string read_device_time(const std::string& v, const std::string&, Config& c) {
  tracer::DeviceTimingOptions& t = c.device_timing;
  if (v == "first" || v == "all") {
    t.enabled = true;
    t.first_calls = v == "first";
    t.first_calls_asked = v == "first";
    return "";
  }
  const auto b = boolean(v);
  if (!b) return "is not first or all, nor 1, true, on or yes, nor 0, false, off or no";
  t.enabled = *b;
  t.first_calls = *b;
  t.first_calls_asked = false;
  return "";
}
std::string device_time_text(const Config& c) {
  return c.device_timing.enabled ? (c.device_timing.first_calls ? "first" : "all") : "0";
}

std::string read_log(const std::string& v, const std::string&, Config& c) {
  static const char* const kLevels[] = {"off", "warn", "info", "debug", "0", "1", "2", "3"};
  for (const char* level : kLevels)
    if (v == level) {
      c.log_level = log::parse_level(level);
      return "";
    }
  return "is not off, warn, info or debug (or 0 to 3)";
}
std::string log_text(const Config& c) {
  static const char* const kNames[] = {"off", "warn", "info", "debug"};
  return kNames[static_cast<int>(c.log_level)];
}

std::string read_trace(const std::string& v, const std::string& file_dir, Config& c) {
  if (v == "off" || v == "0" || v == "false") {
    c.trace = false;
  } else {
    c.trace = true;
    c.trace_path = resolved(v, file_dir);
  }
  return "";
}

// Where a setting lives: a member of Config (At<&Config::flush_seconds>), or a member of the options
// of the part that uses it, which Config holds (At<&Config::tracer, &tracer::TracerOptions::int_ranges>).
template <auto... Path>
struct At {
  // clang-format off
  static auto& in(Config& c) { return (c .* ... .* Path); }
  static const auto& in(const Config& c) { return (c .* ... .* Path); }
  // clang-format on
  using Type = std::remove_reference_t<decltype(in(std::declval<Config&>()))>;
};

// Generic readers of one setting: a flag, a number within limits, a path.
template <class Field>
std::string read_flag(const std::string& v, const std::string&, Config& c) {
  const auto b = boolean(v);
  if (!b) return kNotBoolean;
  Field::in(c) = *b;
  return "";
}
template <class Field>
std::string flag_text(const Config& c) {
  return Field::in(c) ? "1" : "0";
}

template <class Field, long long Min, long long Max>
std::string read_number(const std::string& v, const std::string&, Config& c) {
  using T = typename Field::Type;
  constexpr bool integer = std::is_integral_v<T>;
  const auto d = number(v, static_cast<double>(Min), static_cast<double>(Max));
  if (!d || (integer && std::floor(*d) != *d)) return not_a_number(Min, Max, integer);
  Field::in(c) = static_cast<T>(*d);
  return "";
}
template <class Field>
std::string number_value_text(const Config& c) {
  return number_text(static_cast<double>(Field::in(c)));
}

template <class Field>
std::string read_path(const std::string& v, const std::string& file_dir, Config& c) {
  Field::in(c) = resolved(v, file_dir);
  return "";
}
template <class Field>
std::string path_text(const Config& c) {
  return Field::in(c);
}

using Tracer = tracer::TracerOptions;
using Timing = tracer::DeviceTimingOptions;
using TraceSampling = tracer::TraceSamplingOptions;

std::string read_policy(const std::string& v, const std::string& file_dir, Config& c) {
  c.policy = resolved(v, file_dir);
  c.policy_section.clear();
  return "";
}

std::string trace_text(const Config& c) { return c.trace ? c.trace_path : "off"; }

}  // namespace

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      {"BB_DISABLE", "disable", "1", "turn everything off", read_flag<At<&Config::disabled>>,
       flag_text<At<&Config::disabled>>},
      {"BB_TRACE", "trace", "path",
       "trace file (default `bbtrace.yaml` in the working directory); `%p` → pid, `%r` → rank; `off` disables "
       "tracing",
       read_trace, trace_text},
      {"BB_LOG", "log", "off\\|warn\\|info\\|debug", "stderr verbosity (default `warn`: only problems)", read_log,
       log_text},
      {"BB_FLUSH_SECONDS", "flush_seconds", "s",
       "rewrite the trace every `s` seconds while running, after trying every second until the first file is "
       "written (default 10; 0: only at exit and on signals; at most 86400)",
       read_number<At<&Config::flush_seconds>, 0, 86400>, number_value_text<At<&Config::flush_seconds>>},
      {"BB_MAX_SIGNATURES", "max_signatures", "n",
       "distinct signatures kept (default 100000, at most 100000000); calls past it are counted as "
       "`untraced_calls`",
       read_number<At<&Config::tracer, &Tracer::max_signatures>, 1, 100000000>,
       number_value_text<At<&Config::tracer, &Tracer::max_signatures>>},
      {"BB_INT_RANGES", "int_ranges", "0", "do not sample value ranges of integer tensors",
       read_flag<At<&Config::tracer, &Tracer::int_ranges>>, flag_text<At<&Config::tracer, &Tracer::int_ranges>>},
      {"BB_DEVICE_TIME", "device_time", "first\\|all\\|0",
       "CUPTI device timing on CUDA: `first` (the default, also `1`) times each signature's first calls "
       "(`BB_DEVICE_TIME_CALLS`), extrapolates the rest and detaches CUPTI while no signature wants more; "
       "`all` times every call (a timeline needs it; CUPTI attached costs every launch: 1.3-1.6x a "
       "launch-bound step, docs/performance.md); `0` none ([docs/device-time.md](docs/device-time.md))",
       read_device_time, device_time_text},
      {"BB_DEVICE_TIME_CALLS", "device_time_calls", "n",
       "with first-calls timing: timed calls each signature gets before CUPTI is detached (default 5, 1 to "
       "1000000); the trace extrapolates each signature's total to all its calls",
       read_number<At<&Config::device_timing, &Timing::calls>, 1, 1000000>,
       number_value_text<At<&Config::device_timing, &Timing::calls>>},
      {"BB_DEVICE_TIME_REFRESH", "device_time_refresh", "s",
       "with first-calls timing: every `s` seconds each signature wants one more timed call, to follow "
       "drift (default 10; 0: never; at most 86400)",
       read_number<At<&Config::device_timing, &Timing::refresh_s>, 0, 86400>,
       number_value_text<At<&Config::device_timing, &Timing::refresh_s>>},
      {"BB_DEVICE_TIME_SAMPLE", "device_time_sample", "100/1000",
       "windowed device timing instead: only calls inside 100 ms windows every 1000 ms are timed, and CUPTI is "
       "detached in between ([docs/device-time.md](docs/device-time.md), "
       "[docs/performance.md](docs/performance.md))",
       read_sampling, sampling_text},
      {"BB_TRACE_SAMPLE", "trace_sample", "N",
       "sampled tracing, for launch-bound programs where tracing every call costs too much (1.18x the small "
       "Llama's step on the H200; sampled 1.04-1.06x): once the signatures seen are stable, one call in `N` "
       "(2 to 1000000), chosen at random, is traced and stands for `N` calls (the trace marks extrapolated "
       "counts: `seen`, `meta.tracing`); every call is traced again while device timing records or routing "
       "is on, and when the sampled calls bring new signatures. Counts are estimates (a signature made once "
       "a step is off by tens of percent over 20 steps), and one made only a few times after that may be "
       "missed ([docs/trace-format.md](docs/trace-format.md), [docs/performance.md](docs/performance.md)); "
       "0 or 1 (default): every call",
       read_number<At<&Config::trace_sampling, &TraceSampling::every>, 0, 1000000>,
       number_value_text<At<&Config::trace_sampling, &TraceSampling::every>>},
      {"BB_TIMELINE", "timeline", "path",
       "also write a Chrome-trace/Perfetto timeline there at exit; `%p`, `%r` as for `BB_TRACE`",
       read_path<At<&Config::timeline>>, path_text<At<&Config::timeline>>},
      {"BB_TIMELINE_MAX_EVENTS", "timeline_max_events", "n",
       "timeline events kept per kind (default 1000000, at most 1000000000; later ones are counted, not kept)",
       read_number<At<&Config::device_timing, &Timing::timeline_max_events>, 1, 1000000000>,
       number_value_text<At<&Config::device_timing, &Timing::timeline_max_events>>},
      {"BB_BACKEND", "backend", "dir",
       "route every op this backend folder provides ([docs/backends.md](docs/backends.md))",
       read_path<At<&Config::backend>>, path_text<At<&Config::backend>>},
      {"BB_POLICY", "policy", "file",
       "routing policy: which ops, conditions, route/shadow/off, errors, tolerances "
       "([docs/policy.md](docs/policy.md)); in a BB_CONFIG file also the policy itself (a map)",
       read_policy, path_text<At<&Config::policy>>},
      {"BB_SUMMARY", "summary", "file", "write the routing summary there instead of stderr",
       read_path<At<&Config::summary>>, path_text<At<&Config::summary>>},
  };
  return table;
}

const Setting* setting_for_key(const std::string& key) {
  for (const Setting& s : settings())
    if (key == s.key) return &s;
  return nullptr;
}

}  // namespace bb::shim
