// Sampled tracing (BB_TRACE_SAMPLE=N): PyTorch boxes every op's arguments for a callback that asks for
// them, and on launch-bound steps that alone costs 1.1-1.3x the step (docs/performance.md). So once
// the signatures seen are stable, the tracer's callback is swapped for one that PyTorch runs for one
// op call in N, chosen at random per call (RecordFunctionCallback::samplingProb: a call not chosen
// costs a counter decrement, though PyTorch's sampling itself still costs a step 1-3%). Each call seen
// then stands for N calls: the counts are estimates without bias, whatever each op costs. Time
// windows were tried first and were biased: tracing slows the calls inside a window, cheap ops more
// than others, so windows saw too few of the cheap ones. Every call is traced again while something
// needs it (device timing tying launches to ops, routing) and when the sampled calls bring new
// signatures (the program changed what it does). The decisions are here, without torch, so that they
// are tested as such; observer.cpp switches the callbacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "tracer/format/trace_model.h"

namespace bb::tracer {

struct TraceSamplingOptions {
  uint32_t every = 0;         // trace one call in `every` once stable; 0 or 1: every call
  uint32_t settle_ms = 200;   // stable this long before sampling starts
  double new_share = 0.01;    // stable: new signatures at most this share of the calls traced
  uint64_t min_calls = 1000;  // over at least this many calls (fewer: tracing them all is cheap)
  bool enabled() const { return every > 1; }
  std::string describe() const;  // "1 call in 16, at random, once the signatures seen are stable"
};

class TraceSampler {
 public:
  using clock = std::chrono::steady_clock;
  TraceSampler(TraceSamplingOptions options, clock::time_point start);

  // calls: traced so far (every one while tracing all, the sampled ones while sampling); signatures:
  // distinct so far, not counting those that differ from one seen only in float scalars' values
  // (TraceStore::progress()); hold: something needs every call traced now. Returns whether to sample
  // from now on.
  bool step(clock::time_point now, uint64_t calls, uint64_t signatures, bool hold);

  const TraceSamplingOptions& options() const { return options_; }
  bool sampling() const { return sampling_; }
  // What happened so far, for the trace's meta.tracing (calls_seen left to the caller).
  trace::TracingInfo report() const;
  static constexpr size_t kMaxEvents = 1000;
  static constexpr std::chrono::milliseconds kPoll{10};  // how often the caller should ask

 private:
  struct Mark {
    clock::time_point t;
    uint64_t calls, signatures;
  };
  void note(clock::time_point t, std::string what);

  const TraceSamplingOptions options_;
  bool sampling_ = false;
  bool held_ = false;  // every call traced because of a hold that began while sampling, and still held
  clock::time_point last_;
  std::deque<Mark> history_;  // since the last switch: the counts over the last settle_ms and more
  std::chrono::nanoseconds full_{0}, sampled_{0};
  uint64_t to_sampled_ = 0;
  std::vector<trace::TimingEvent> events_;
};

}  // namespace bb::tracer
