// The preload's settings: from the YAML file BB_CONFIG names (if any), then from BB_* environment
// variables, which win (docs: README, "Using the preload"). Each is declared once, in settings.cpp's
// table; the settings of a part that takes options are read straight into that part's own type, which
// the runtime hands over whole (the tracer's, device timing's, sampled tracing's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tracer/device_timing_options.h"
#include "tracer/log.h"
#include "tracer/trace_sampling.h"
#include "tracer/tracer_options.h"

namespace bb::shim {

struct Config {
  bool disabled = false;                    // BB_DISABLE=1
  bool trace = true;                        // BB_TRACE=off turns tracing off
  std::string trace_path;                   // BB_TRACE=path ("" = default name); %p pid, %r rank
  log::Level log_level = log::Level::Warn;  // BB_LOG
  double flush_seconds = 10.0;              // BB_FLUSH_SECONDS: periodic rewrite; 0 = only at exit/signal
  std::string timeline;                     // BB_TIMELINE: write a Chrome-trace timeline here at exit; %p pid, %r rank
  std::string backend;                      // BB_BACKEND: route the ops this backend folder provides
  std::string policy;                       // BB_POLICY: routing policy file (narrows BB_BACKEND; may name the backend)
  std::string summary;                      // BB_SUMMARY: write the routing summary here instead of stderr
  std::string policy_section;               // non-empty: the policy is this key of the file `policy` names (BB_CONFIG)

  // The options of the parts that take them, each handed over whole.
  tracer::TracerOptions tracer;                 // BB_MAX_SIGNATURES, BB_INT_RANGES (start_tracing)
  tracer::TraceSamplingOptions trace_sampling;  // BB_TRACE_SAMPLE: its `every` (start_trace_sampling)
  // BB_DEVICE_TIME, BB_DEVICE_TIME_CALLS, _REFRESH, _SAMPLE, BB_TIMELINE_MAX_EVENTS (install_cuda_support)
  tracer::DeviceTimingOptions device_timing;

  std::vector<std::string> problems;  // invalid values that fell back to defaults
};

using Getenv = std::function<const char*(const char*)>;
Config config_from_env(const Getenv& getenv);

}  // namespace bb::shim
