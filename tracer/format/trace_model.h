// The trace as data: what the preload records and what replay reads. No torch dependency.
// The on-disk form (YAML) is described in docs/trace-format.md.
#pragma once

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bb::trace {

inline constexpr int kFormatVersion = 1;

// The runtime kind of one argument value. Schema types are kept as text in ArgValue::type.
enum class ArgKind {
  None,
  Tensor,
  Int,
  Float,
  Bool,
  Complex,
  String,
  IntList,
  FloatList,
  BoolList,
  TensorList,     // Tensor[]
  OptTensorList,  // Tensor?[]: elements may be null
  ScalarType,     // a dtype value, e.g. dtype=torch.float16
  Layout,
  Device,
  MemoryFormat,
  Generator,
  Symbolic,  // SymInt/SymFloat/SymBool without a concrete value
  Other,     // a value kind the tracer does not record; `text` says which
};

const char* to_string(ArgKind kind);
std::optional<ArgKind> arg_kind_from_string(const std::string& text);

struct TensorMeta {
  std::string dtype = "float32";  // torch's Python name: float32, bfloat16, int64, bool, ...
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // empty for non-strided layouts or symbolic shapes
  std::string device = "cpu";   // cpu, cuda:0, meta, ...
  std::string layout = "strided";
  int64_t offset = 0;                                // storage offset in elements
  bool symbolic = false;                             // shape not concrete (torch.compile tracing); shape/stride empty
  std::optional<std::pair<int64_t, int64_t>> range;  // integer tensors: observed [min, max]

  bool operator==(const TensorMeta& o) const;
};

struct ArgValue {
  std::string name;  // schema argument name
  std::string type;  // schema type as torch prints it: Tensor, int[], Scalar, ScalarType?, ...
  ArgKind kind = ArgKind::None;
  bool kwarg_only = false;  // passed by keyword only (after `*` in the schema)

  int64_t i = 0;                                   // Int, and the enum values of ScalarType/Layout/MemoryFormat
  double f = 0.0;                                  // Float
  bool b = false;                                  // Bool
  std::complex<double> c;                          // Complex
  std::string text;                                // String; names for ScalarType/Layout/Device/MemoryFormat; Other
  std::vector<int64_t> ints;                       // IntList
  std::vector<double> floats;                      // FloatList
  std::vector<bool> bools;                         // BoolList
  std::vector<std::optional<TensorMeta>> tensors;  // Tensor (one), TensorList, OptTensorList

  bool operator==(const ArgValue& o) const;
};

// Device time of a signature's calls (CUDA, measured with CUPTI): each call's time is the sum of
// the durations of the kernels, copies and sets it launched. Nanoseconds.
struct DeviceTime {
  uint64_t calls = 0;                                            // calls timed
  uint64_t total_ns = 0, min_ns = 0, median_ns = 0, max_ns = 0;  // over the timed calls
  // When fewer calls were timed than made: the device time of all of them, extrapolated
  // (tracer/format/device_estimate.h). 0 when every call was timed (or the trace predates it).
  uint64_t estimated_total_ns = 0;
  // No call of this signature was timed: estimated_total_ns is from signatures equal to it but for
  // the values of float scalars (estimate_from_similar()).
  bool from_similar = false;
  bool operator==(const DeviceTime& o) const {
    return calls == o.calls && total_ns == o.total_ns && min_ns == o.min_ns && median_ns == o.median_ns &&
           max_ns == o.max_ns && estimated_total_ns == o.estimated_total_ns && from_similar == o.from_similar;
  }
};

struct KernelCount {
  std::string name;  // demangled kernel name, or Memcpy HtoD, Memset, ...
  uint64_t launches = 0;
  bool operator==(const KernelCount& o) const { return name == o.name && launches == o.launches; }
};

struct TraceEntry {
  std::string op;              // full overload name: aten::add.Tensor, aten::relu (default overload)
  uint64_t count = 0;          // calls with exactly this signature
  uint64_t nested = 0;         // of those, calls made from inside another op
  uint64_t with_children = 0;  // of those, calls that themselves called other ops
  uint64_t routed = 0;         // of those, calls a generated kernel handled (routing)
  // Sampled tracing: the calls actually seen; count (and nested, with_children) are then extrapolated
  // from them. 0: every call was seen and the counts are exact.
  uint64_t seen = 0;
  // Calls whose float scalars had other values are counted here too: past TraceStore's
  // kMaxFloatVariants variants of a signature (a step-dependent scalar makes one every step), later
  // ones are merged into the first; args keep its values.
  bool floats_merged = false;
  std::vector<ArgValue> args;             // in schema order
  std::optional<DeviceTime> device_time;  // when measured
  std::vector<KernelCount> kernels;       // what its calls launched, most launches first

  uint64_t top_level() const { return count - nested; }
  uint64_t leaf() const { return count - with_children; }
  bool operator==(const TraceEntry& o) const;
};

struct DeviceInfo {
  std::string device;  // cuda:0
  std::string name;    // NVIDIA H200
  bool operator==(const DeviceInfo& o) const { return device == o.device && name == o.name; }
};

// Sampled timing: a window opened or closed, CUPTI detached or not (tracer/devtime/cupti_session.h).
struct TimingEvent {
  double t = 0;      // CLOCK_MONOTONIC, seconds (Python's time.monotonic() on the same host)
  std::string what;  // "open: repeating call", "close: no wanted call for 20 ms", "detached", ...
  bool operator==(const TimingEvent& o) const { return t == o.t && what == o.what; }
};

// How device timing went in the traced process.
struct DeviceTiming {
  std::string status;  // on | off: why | stopped: why
  uint64_t calls_timed = 0;
  uint64_t dropped_records = 0;     // CUPTI dropped them (buffers full)
  uint64_t unfinished_records = 0;  // still running at the last flush: left out
  uint64_t incomplete_calls = 0;    // calls with such a record: not timed
  std::string mode;                 // all | first-calls | windows; empty: before the mode was written
  std::string sampled;              // "first 5 calls of each signature, ...", "10 ms of every 100 ms"; empty: all
  uint64_t windows = 0;             // sampled: windows opened
  uint64_t detaches = 0;            // sampled: gaps between windows with CUPTI detached
  uint64_t cut_calls = 0;           // sampled: calls a window's edge fell in: not timed
  uint64_t untracked_launches = 0;  // sampled: launches of calls begun between windows, after one opened
  uint64_t control_ns = 0;          // sampled: spent attaching and detaching CUPTI
  uint64_t signatures_short = 0;    // first-calls: signatures that had fewer timed calls than wanted
  std::vector<TimingEvent> events;  // sampled: windows opened and closed, detaches, in order (the first 1000)
  uint64_t cupti_overhead_ns = 0;   // what CUPTI's own overhead records say it spent
  uint64_t cupti_overhead_records = 0;
  uint64_t unattributed = 0;  // device activity launched outside any op call
  uint64_t unattributed_ns = 0;
  std::vector<KernelCount> unattributed_kernels;  // by name, most launches first
  bool operator==(const DeviceTiming& o) const;
};

// One process of a merged trace (bbtrace merge): what its own trace's meta said.
struct ProcessInfo {
  std::string file;  // the trace it came from
  int64_t pid = 0;
  std::optional<int64_t> rank;
  std::string hostname, status, created, updated;
  std::vector<std::string> argv;
  std::vector<DeviceInfo> devices;  // as that process numbered them
  uint64_t calls = 0;
  bool operator==(const ProcessInfo& o) const;
};

// Sampled tracing (BB_TRACE_SAMPLE): every call traced until the signatures seen were stable, then
// one call in `scale` at random, each standing for `scale` calls (tracer/trace_sampling.h).
struct TracingInfo {
  std::string sampled;              // "1 call in 16, at random, once the signatures seen are stable ..."
  uint64_t calls_seen = 0;          // calls the tracer saw (meta.calls includes the extrapolated ones)
  double full_s = 0;                // seconds every call was traced
  double sampled_s = 0;             // seconds it was sampled
  uint64_t to_sampled = 0;          // times tracing went from every call to sampling
  double scale = 0;                 // the calls each sampled call stands for
  std::vector<TimingEvent> events;  // switches and why, in order (the first 1000)
  bool operator==(const TracingInfo& o) const {
    return sampled == o.sampled && calls_seen == o.calls_seen && full_s == o.full_s && sampled_s == o.sampled_s &&
           to_sampled == o.to_sampled && scale == o.scale && events == o.events;
  }
};

struct TraceMeta {
  std::string tool;     // bbshim <version>
  std::string torch;    // torch.__version__ of the traced process
  std::string created;  // UTC, ISO 8601
  std::string updated;  // UTC, ISO 8601: when this file was written
  std::string status;   // running | exited | signal <NAME>
  int64_t pid = 0;
  std::optional<int64_t> rank;
  std::optional<int64_t> world_size;
  std::string hostname;
  std::vector<std::string> argv;
  std::vector<DeviceInfo> devices;
  uint64_t calls = 0;                         // traced op calls, all signatures
  uint64_t untraced_calls = 0;                // calls not recorded because the signature limit was reached
  std::optional<TracingInfo> tracing;         // only when tracing was sampled (BB_TRACE_SAMPLE)
  std::optional<DeviceTiming> device_timing;  // processes that used CUDA
  std::vector<ProcessInfo> merged_from;       // a merged trace: its processes, in order
  bool operator==(const TraceMeta& o) const;
};

struct Trace {
  int version = kFormatVersion;
  TraceMeta meta;
  std::vector<TraceEntry> ops;
  bool operator==(const Trace& o) const;
};

// Everything of a signature that ArgValue::operator== compares, but the observed integer ranges: equal
// keys, one signature (bbtrace merge).
std::string signature_key(const TraceEntry& e);

// True for torch's Python name of a dtype (float32, bfloat16, float8_e4m3fn, uint4, ...).
bool is_dtype_name(const std::string& name);

// Strides of a contiguous tensor of `shape` (size-0 dimensions count as 1, as torch does).
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

// Why no tensor can have this shape, stride and offset: its element count, its contiguous strides or the
// storage it spans do not fit in 64 bits. nullptr if they do. The readers reject such a tensor at its
// position, so that later code (contiguous_strides, numel, storage extents) can multiply unchecked.
const char* unaddressable(const TensorMeta& t);

// The current time as UTC ISO 8601 (2026-11-30T01:00:00Z), as traces and reports record it.
std::string utc_now();

}  // namespace bb::trace
