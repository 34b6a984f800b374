// Hooks every ATen op call (all threads, forward and backward) through a global RecordFunction
// callback and counts it under its exact signature in a TraceStore.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <optional>

#include "tracer/trace_sampling.h"
#include "tracer/trace_store.h"
#include "tracer/tracer_options.h"

namespace bb::tracer {

// Samples the value range of an integer tensor that is not on the CPU, without synchronizing.
using DeviceRangeProbe = void (*)(TraceStore* store, uint32_t sig, RangeTarget where, const at::Tensor& t);

// Registers the callback and starts counting into a new store; once per process: later calls
// return the running store and ignore their options.
TraceStore* start_tracing(const TracerOptions& options);

// Sampled tracing (tracer/trace_sampling.h), after start_tracing: a thread of its own swaps the
// callback for one PyTorch runs for one call in options.every, and back. hold (may be null), asked
// every few milliseconds: true while every call must be traced (device timing tying launches to ops,
// routing). False when it does not start (disabled, no tracing, already started, no thread: then
// every call is traced).
bool start_trace_sampling(const TraceSamplingOptions& options, bool (*hold)());

struct SampledTracing {
  trace::TracingInfo info;  // calls_seen not filled in
  double scale;             // what a call seen while sampling stands for
};
// nullopt when tracing is not sampled.
std::optional<SampledTracing> sampled_tracing();

// For a forked child: forget the parent's store; with keep_tracing, count into a fresh one.
void reset_after_fork(bool keep_tracing);

void set_device_range_probe(DeviceRangeProbe probe);

// Told about each device (cuda:0, ...) the first time any signature uses it, on the thread of the
// call that used it, without the store's lock held.
using DeviceListener = void (*)(const std::string& device);
void set_device_listener(DeviceListener listener);

// Called around each op call (with its signature, or devtime::kNoSignature past the signature
// limit) once set, with `context` as given; `end` runs at the call's end, on its thread, only when
// `start` returned true. `sampled`: the call began while sampled tracing saw one call in N, so calls
// inside it may go unseen (device timing then never times it: their launches would count as its own).
using OpStartHook = bool (*)(void* context, uint32_t sig, bool sampled);
using OpEndHook = void (*)(void* context);
void set_op_hooks(OpStartHook start, OpEndHook end, void* context);
// Whether this thread is inside a traced op call now, or may be inside one the tracer did not see
// (sampled tracing): for CUDA's launch callbacks (never throws).
bool inside_traced_op() noexcept;

// Whether sig differs from an earlier signature only in float scalars' values (TraceStore).
bool float_variant(uint32_t sig);
// sig in a line (TraceStore::describe), for messages.
std::string describe_signature(uint32_t sig);
// Runs `task` once, on the thread of the next traced op call (a cheap way to do deferred work
// inside the program without a thread of our own).
void run_on_next_op(void (*task)());

// Counts the innermost op call of this thread as handled by a generated kernel (the router calls
// this from inside the op). No-op when the call is not traced.
void mark_routed();

}  // namespace bb::tracer
