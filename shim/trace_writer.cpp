#include "shim/trace_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "tracer/cuda_support.h"
#include "tracer/log.h"
#include "tracer/observer.h"
#include "tracer/devtime/timeline.h"
#include "tracer/format/atomic_file.h"
#include "tracer/format/device_estimate.h"
#include "tracer/format/op_name.h"
#include "tracer/format/trace_yaml.h"

namespace bb::shim {
namespace {

std::optional<long> env_long(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end) return std::nullopt;
  return n;
}

std::vector<std::string> read_cmdline() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  size_t start = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    if (all[k] != '\0') continue;
    argv.push_back(all.substr(start, k - start));
    start = k + 1;
  }
  return argv;
}

}  // namespace

RunInfo current_run_info(const std::string& torch_version) {
  RunInfo r;
  r.torch_version = torch_version;
  r.created = trace::utc_now();
  r.id.pid = ::getpid();
  r.id.rank = env_long("RANK");
  r.id.world_size = env_long("WORLD_SIZE");
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) == 0) r.hostname = host;
  r.argv = read_cmdline();
  return r;
}

namespace {

std::vector<trace::KernelCount> by_launches(const std::map<std::string, uint64_t>& names) {
  std::vector<trace::KernelCount> out;
  for (const auto& [name, n] : names) out.push_back({name, n});
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.launches > b.launches; });
  return out;
}

// torch.profiler's names for dtypes in "Input type" (C++ type names).
std::string profiler_type(const std::string& dtype) {
  static const std::map<std::string, std::string> names = {{"float32", "float"},
                                                           {"float64", "double"},
                                                           {"float16", "c10::Half"},
                                                           {"bfloat16", "c10::BFloat16"},
                                                           {"int64", "long int"},
                                                           {"int32", "int"},
                                                           {"int16", "short int"},
                                                           {"int8", "signed char"},
                                                           {"uint8", "unsigned char"},
                                                           {"bool", "bool"},
                                                           {"complex64", "c10::complex<float>"},
                                                           {"complex128", "c10::complex<double>"}};
  auto it = names.find(dtype);
  return it == names.end() ? dtype : it->second;
}

std::string shape_json(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

devtime::OpLabel label_of(const trace::TraceEntry& e) {
  devtime::OpLabel l;
  l.name = trace::base_name(e.op);
  std::string dims = "[", types = "[";
  for (size_t k = 0; k < e.args.size(); ++k) {
    const trace::ArgValue& a = e.args[k];
    std::string d = "[]", t = "\"\"";
    if (a.kind == trace::ArgKind::Tensor && !a.tensors.empty() && a.tensors[0]) {
      d = shape_json(a.tensors[0]->shape);
      t = "\"" + profiler_type(a.tensors[0]->dtype) + "\"";
    } else if (a.kind == trace::ArgKind::TensorList || a.kind == trace::ArgKind::OptTensorList) {
      t = "\"TensorList\"";
    } else if (a.kind == trace::ArgKind::Int || a.kind == trace::ArgKind::Float || a.kind == trace::ArgKind::Bool ||
               a.kind == trace::ArgKind::Complex) {
      t = "\"Scalar\"";
    } else if (a.kind == trace::ArgKind::IntList || a.kind == trace::ArgKind::FloatList ||
               a.kind == trace::ArgKind::BoolList) {
      t = "\"ScalarList\"";
    }
    dims += (k ? ", " : "") + d;
    types += (k ? ", " : "") + t;
  }
  l.input_dims = dims + "]";
  l.input_types = types + "]";
  return l;
}

}  // namespace

std::string write_timeline_file(const std::string& path, const tracer::Snapshot& snap,
                                const devtime::Collector::Timeline& events, const RunInfo& run) {
  std::map<uint32_t, devtime::OpLabel> labels;
  for (size_t k = 0; k < snap.entries.size() && k < snap.sigs.size(); ++k)
    labels.emplace(snap.sigs[k], label_of(snap.entries[k]));
  devtime::TimelineInfo info;
  info.pid = run.id.pid;
  for (const auto& a : run.argv) info.trace_name += (info.trace_name.empty() ? "" : " ") + a;
  info.label = [&](uint32_t sig) -> const devtime::OpLabel* {
    auto it = labels.find(sig);
    return it == labels.end() ? nullptr : &it->second;
  };
  std::ostringstream out;
  devtime::write_timeline(out, events, info);
  return format::write_file_atomic(path, out.str());
}

trace::Trace make_trace(const tracer::Snapshot& snap, const RunInfo& run, const std::string& status,
                        const tracer::DeviceTimeSnapshot* times, const trace::TracingInfo* tracing) {
  trace::Trace t;
  t.meta.tool = std::string("bbshim ") + BB_VERSION;
  t.meta.torch = run.torch_version;
  t.meta.created = run.created;
  t.meta.updated = trace::utc_now();
  t.meta.status = status;
  t.meta.pid = run.id.pid;
  t.meta.rank = run.id.rank;
  t.meta.world_size = run.id.world_size;
  t.meta.hostname = run.hostname;
  t.meta.argv = run.argv;
  for (const auto& d : snap.devices) t.meta.devices.push_back({d, tracer::device_name(d)});
  t.meta.calls = snap.calls;
  t.meta.untraced_calls = snap.untraced_calls;
  if (tracing) {
    t.meta.tracing = *tracing;
    t.meta.tracing->calls_seen = snap.calls_seen;
  }
  t.ops = snap.entries;
  bool cuda = false;
  for (const auto& d : snap.devices) cuda = cuda || d.rfind("cuda", 0) == 0;
  if (times && cuda) {
    // Timing that left calls out on purpose (first-calls, windows): totals extrapolated to every call,
    // and signatures none of whose calls was timed estimated from those equal to them but for float
    // scalars' values (AdamW's step-dependent ones). Where every call is timed, the untimed calls
    // launched nothing.
    const bool sampled = times->mode == "first-calls" || times->mode == "windows";
    for (size_t k = 0; k < t.ops.size() && k < snap.sigs.size(); ++k) {
      auto it = times->by_signature.find(snap.sigs[k]);
      if (it == times->by_signature.end()) continue;
      const devtime::Sketch& s = it->second.per_call;
      if (s.count() > 0) {
        trace::DeviceTime d{s.count(), s.total(), s.min(), s.median(), s.max()};
        // More timed calls than calls: one call's records were split in two (a record delivered after
        // its call was taken as whole). Its device work all happened in these calls: the total stands,
        // the calls are the calls (a trace claiming more would be refused by every reader).
        d.calls = std::min<uint64_t>(d.calls, t.ops[k].count);
        if (sampled && d.calls < t.ops[k].count) d.estimated_total_ns = trace::extrapolate(d, t.ops[k].count);
        t.ops[k].device_time = d;
      }
      t.ops[k].kernels = by_launches(it->second.kernels);
    }
    if (sampled) trace::estimate_from_similar(t.ops);
    trace::DeviceTiming d;
    d.status = times->status;
    d.calls_timed = times->health.calls_timed;
    d.dropped_records = times->health.dropped;
    d.unfinished_records = times->health.unfinished;
    d.incomplete_calls = times->health.calls_incomplete;
    d.mode = times->mode;
    d.sampled = times->sampled;
    d.windows = times->windows;
    d.detaches = times->detaches;
    d.cut_calls = times->health.calls_cut;
    d.untracked_launches = times->health.untracked_launches;
    d.control_ns = times->control_ns;
    d.signatures_short = times->signatures_short;
    for (const auto& e : times->events) d.events.push_back({e.t, e.what});
    d.cupti_overhead_ns = times->health.overhead_ns;
    d.cupti_overhead_records = times->health.overhead_records;
    d.unattributed = times->health.unattributed;
    d.unattributed_ns = times->health.unattributed_ns;
    d.unattributed_kernels = by_launches(times->health.unattributed_names);
    t.meta.device_timing = d;
  }
  return t;
}

TraceWriter::TraceWriter(const tracer::TraceStore* store, std::string path, RunInfo run, std::string timeline_path)
    : store_(store), path_(std::move(path)), run_(std::move(run)), timeline_path_(std::move(timeline_path)) {}

bool TraceWriter::write(const std::string& status, bool final) {
  try {
    return write_unguarded(status, final);
  } catch (...) {
    log::warn_once("write-error:" + path_, "cannot write the trace: internal error (" + log::current_exception_text() +
                                               "); the program continues");
  }
  return false;
}

bool TraceWriter::write_unguarded(const std::string& status, bool final) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return true;
  finished_ = final;
  tracer::collect_device_ranges(final);
  const tracer::DeviceTimeSnapshot times = tracer::device_time_snapshot();
  const std::optional<tracer::SampledTracing> sampled = tracer::sampled_tracing();
  tracer::Snapshot snap = store_->snapshot(sampled ? sampled->scale : 1.0);
  if (snap.calls == 0 && snap.untraced_calls == 0) return true;  // nothing ran: leave no file
  if (final && !timeline_path_.empty()) {
    std::string err = write_timeline_file(timeline_path_, snap, tracer::device_timeline(), run_);
    if (!err.empty()) log::warn("cannot write the timeline: " + err);
    else
      log::debug("wrote the timeline " + timeline_path_);
  }
  if (!final && status == "running" && snap.calls_seen == last_calls_) return true;
  last_calls_ = snap.calls_seen;
  std::string err = format::write_file_atomic(
      path_, trace::to_yaml(make_trace(snap, run_, status, &times, sampled ? &sampled->info : nullptr)));
  if (err.empty()) {
    log::debug("wrote " + path_ + " (" + std::to_string(snap.entries.size()) + " signatures, " +
               std::to_string(snap.calls) + " calls, " + status + ")");
    return true;
  }
  log::warn_once("write:" + path_, "cannot write the trace: " + err + " (the program continues)");
  return false;
}

}  // namespace bb::shim
