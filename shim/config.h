// The preload's settings: from the YAML file BB_CONFIG names (if any), then from BB_* environment
// variables, which win (docs: README, "Using the preload").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tracer/log.h"

namespace bb::shim {

struct Config {
  bool disabled = false;                    // BB_DISABLE=1
  bool trace = true;                        // BB_TRACE=off turns tracing off
  std::string trace_path;                   // BB_TRACE=path ("" = default name); %p pid, %r rank
  log::Level log_level = log::Level::Warn;  // BB_LOG
  double flush_seconds = 10.0;              // BB_FLUSH_SECONDS: periodic rewrite; 0 = only at exit/signal
  size_t max_signatures = 100000;           // BB_MAX_SIGNATURES
  bool int_ranges = true;                   // BB_INT_RANGES=0 turns value-range sampling off
  bool device_time = true;                  // BB_DEVICE_TIME=0 turns CUPTI device timing off
  bool device_time_first = true;            // first calls of each signature; BB_DEVICE_TIME=all: every call
  bool device_time_first_asked = false;     // BB_DEVICE_TIME=first itself: warn where it cannot be had
  uint32_t device_time_calls = 5;           // BB_DEVICE_TIME_CALLS: timed calls wanted per signature
  double device_time_refresh = 10.0;        // BB_DEVICE_TIME_REFRESH (s): one more of each this often; 0: never
  uint32_t sample_on_ms = 0;                // BB_DEVICE_TIME_SAMPLE=ON/PERIOD (ms): device time recorded in
  uint32_t sample_period_ms = 0;            //   windows of ON ms every PERIOD ms; 0/0 = every call
  uint32_t trace_sample = 0;                // BB_TRACE_SAMPLE=N: once signatures are stable, trace one call in N
  std::string timeline;                     // BB_TIMELINE: write a Chrome-trace timeline here at exit; %p pid, %r rank
  size_t timeline_max_events = 1000000;     // BB_TIMELINE_MAX_EVENTS: per kind (ops, launches, kernels)
  std::string backend;                      // BB_BACKEND: route the ops this backend folder provides
  std::string policy;                       // BB_POLICY: routing policy file (narrows BB_BACKEND; may name the backend)
  std::string summary;                      // BB_SUMMARY: write the routing summary here instead of stderr
  std::string policy_section;               // non-empty: the policy is this key of the file `policy` names (BB_CONFIG)

  std::vector<std::string> problems;  // invalid values that fell back to defaults
};

using Getenv = std::function<const char*(const char*)>;
Config config_from_env(const Getenv& getenv);

}  // namespace bb::shim
