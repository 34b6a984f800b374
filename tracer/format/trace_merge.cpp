#include "tracer/format/trace_merge.h"

#include "tracer/format/device_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

namespace bb::trace {
namespace {

using DeviceMap = std::map<std::string, std::string>;

// Per process: each device of its meta.devices, then any other a tensor names, to <type>:<n>, n
// counting from 0 per type in that order.
struct Renumbering {
  DeviceMap map;
  std::map<std::string, int> next;
  std::string operator()(const std::string& device) {
    const size_t colon = device.find(':');
    if (colon == std::string::npos) return device;
    auto [it, fresh] = map.emplace(device, "");
    if (fresh) it->second = device.substr(0, colon) + ":" + std::to_string(next[device.substr(0, colon)]++);
    return it->second;
  }
};

// Tensors' devices and device values (`.to(device="cuda:1")`).
void renumber(std::vector<ArgValue>& args, Renumbering& r) {
  for (auto& a : args) {
    if (a.kind == ArgKind::Device) a.text = r(a.text);
    for (auto& t : a.tensors)
      if (t) t->device = r(t->device);
  }
}

void add_kernels(std::vector<KernelCount>& into, const std::vector<KernelCount>& more) {
  for (const auto& k : more) {
    auto it = std::find_if(into.begin(), into.end(), [&](const KernelCount& x) { return x.name == k.name; });
    if (it == into.end()) into.push_back(k);
    else
      it->launches += k.launches;
  }
}

void sort_kernels(std::vector<KernelCount>& k) {
  std::stable_sort(k.begin(), k.end(),
                   [](const KernelCount& a, const KernelCount& b) { return a.launches > b.launches; });
}

void join_ranges(std::vector<ArgValue>& into, const std::vector<ArgValue>& more) {
  for (size_t a = 0; a < into.size(); ++a)
    for (size_t t = 0; t < into[a].tensors.size(); ++t) {
      auto& mine = into[a].tensors[t];
      const auto& theirs = more[a].tensors[t];
      if (!mine || !theirs || !theirs->range) continue;
      if (!mine->range) mine->range = theirs->range;
      else
        mine->range = {std::min(mine->range->first, theirs->range->first),
                       std::max(mine->range->second, theirs->range->second)};
    }
}

// Count, total, min and max exactly over the timed parts; the median as the calls-weighted median of
// their medians; the estimates summed (from_similar only where no part was timed).
std::optional<DeviceTime> combine(const std::vector<DeviceTime>& parts) {
  if (parts.empty()) return std::nullopt;
  DeviceTime d;
  d.from_similar = true;
  bool timed = false;
  for (const auto& p : parts) {
    d.calls += p.calls;
    d.total_ns += p.total_ns;
    d.estimated_total_ns += p.estimated_total_ns;
    if (p.calls == 0) continue;
    d.min_ns = timed ? std::min(d.min_ns, p.min_ns) : p.min_ns;
    d.max_ns = std::max(d.max_ns, p.max_ns);
    timed = true;
    d.from_similar = false;
  }
  std::vector<DeviceTime> by_median;
  for (const auto& p : parts)
    if (p.calls > 0) by_median.push_back(p);
  std::stable_sort(by_median.begin(), by_median.end(),
                   [](const DeviceTime& a, const DeviceTime& b) { return a.median_ns < b.median_ns; });
  uint64_t seen = 0;
  for (const auto& p : by_median) {
    seen += p.calls;
    d.median_ns = p.median_ns;
    if (2 * seen >= d.calls) break;
  }
  return d;
}

struct Merged {
  TraceEntry entry;
  std::vector<DeviceTime> times;
};

std::vector<TraceEntry> merge_entries(const std::vector<Trace>& traces, const MergeOptions& options) {
  std::vector<Merged> out;
  std::map<std::string, size_t> index;
  for (const auto& t : traces) {
    Renumbering r;
    for (const auto& d : t.meta.devices) r(d.device);
    for (TraceEntry e : t.ops) {
      if (options.renumber_devices) renumber(e.args, r);
      auto [it, fresh] = index.emplace(signature_key(e), out.size());
      if (fresh) {
        out.push_back({e, {}});
        out.back().entry.device_time.reset();
      } else {
        TraceEntry& m = out[it->second].entry;
        // Calls seen: where any part sampled its tracing, the others' exact counts were all seen.
        if (m.seen || e.seen) m.seen = (m.seen ? m.seen : m.count) + (e.seen ? e.seen : e.count);
        m.count += e.count;
        m.nested += e.nested;
        m.with_children += e.with_children;
        m.routed += e.routed;
        m.floats_merged = m.floats_merged || e.floats_merged;
        join_ranges(m.args, e.args);
        add_kernels(m.kernels, e.kernels);
      }
      if (e.device_time) {  // each part with its own estimate (every part's calls: its total)
        DeviceTime d = *e.device_time;
        if (!d.estimated_total_ns) d.estimated_total_ns = extrapolate(d, e.count);
        out[it->second].times.push_back(d);
      }
    }
  }
  std::vector<TraceEntry> entries;
  for (auto& m : out) {
    m.entry.device_time = combine(m.times);
    if (auto& d = m.entry.device_time; d && d->calls >= m.entry.count) d->estimated_total_ns = 0;
    sort_kernels(m.entry.kernels);
    entries.push_back(std::move(m.entry));
  }
  return entries;
}

// One value when every process agrees, else `several`.
template <class Get>
std::string common(const std::vector<Trace>& traces, Get get, const std::string& several) {
  for (const auto& t : traces)
    if (get(t) != get(traces.front())) return several;
  return get(traces.front());
}

std::optional<DeviceTiming> merge_timing(const std::vector<Trace>& traces) {
  std::optional<DeviceTiming> out;
  std::set<std::string> statuses, sampled, modes;
  for (const auto& t : traces) {
    if (!t.meta.device_timing) continue;
    const DeviceTiming& d = *t.meta.device_timing;
    if (!out) out = DeviceTiming{};
    statuses.insert(d.status);
    if (!d.sampled.empty()) sampled.insert(d.sampled);
    if (!d.mode.empty()) modes.insert(d.mode);
    for (auto [into, v] : {std::pair{&out->calls_timed, d.calls_timed},
                           {&out->dropped_records, d.dropped_records},
                           {&out->unfinished_records, d.unfinished_records},
                           {&out->incomplete_calls, d.incomplete_calls},
                           {&out->windows, d.windows},
                           {&out->detaches, d.detaches},
                           {&out->cut_calls, d.cut_calls},
                           {&out->untracked_launches, d.untracked_launches},
                           {&out->control_ns, d.control_ns},
                           {&out->signatures_short, d.signatures_short},
                           {&out->cupti_overhead_ns, d.cupti_overhead_ns},
                           {&out->cupti_overhead_records, d.cupti_overhead_records},
                           {&out->unattributed, d.unattributed},
                           {&out->unattributed_ns, d.unattributed_ns}})
      *into += v;
    add_kernels(out->unattributed_kernels, d.unattributed_kernels);
    for (TimingEvent e : d.events) {  // which process's: its pid in front
      if (traces.size() > 1 && t.meta.pid) e.what = "pid " + std::to_string(t.meta.pid) + ": " + e.what;
      out->events.push_back(std::move(e));
    }
  }
  if (!out) return out;
  // Each process's in time order (monotonic clocks of one host are comparable; of several, roughly).
  std::stable_sort(out->events.begin(), out->events.end(),
                   [](const TimingEvent& a, const TimingEvent& b) { return a.t < b.t; });
  auto joined = [](const std::set<std::string>& s) {
    std::string text;
    for (const auto& x : s) text += (text.empty() ? "" : "; ") + x;
    return text;
  };
  out->status = statuses.size() == 1 ? *statuses.begin() : "differs between processes: " + joined(statuses);
  out->sampled = joined(sampled);
  out->mode = joined(modes);
  sort_kernels(out->unattributed_kernels);
  return out;
}

// Sampled tracing of any process: the seconds and calls added up (a process that traced every call
// counts all its calls as seen); its settings as each process said them.
std::optional<TracingInfo> merge_tracing(const std::vector<Trace>& traces) {
  std::optional<TracingInfo> out;
  for (const auto& t : traces)
    if (t.meta.tracing) out = TracingInfo{};
  if (!out) return out;
  std::set<std::string> sampled;
  for (const auto& t : traces) {
    if (!t.meta.tracing) {
      out->calls_seen += t.meta.calls;
      continue;
    }
    const TracingInfo& x = *t.meta.tracing;
    sampled.insert(x.sampled);
    out->calls_seen += x.calls_seen;
    out->full_s += x.full_s;
    out->sampled_s += x.sampled_s;
    out->to_sampled += x.to_sampled;
    for (TimingEvent e : x.events) {
      if (traces.size() > 1 && t.meta.pid) e.what = "pid " + std::to_string(t.meta.pid) + ": " + e.what;
      out->events.push_back(std::move(e));
    }
  }
  std::stable_sort(out->events.begin(), out->events.end(),
                   [](const TimingEvent& a, const TimingEvent& b) { return a.t < b.t; });
  for (const auto& x : sampled) out->sampled += (out->sampled.empty() ? "" : "; ") + x;
  if (sampled.size() == 1) {  // the processes agree on what a sampled call stands for
    for (const auto& t : traces)
      if (t.meta.tracing) out->scale = t.meta.tracing->scale;
  }
  return out;
}

ProcessInfo process_of(const Trace& t, const std::string& file) {
  const TraceMeta& m = t.meta;
  return {file, m.pid, m.rank, m.hostname, m.status, m.created, m.updated, m.argv, m.devices, m.calls};
}

TraceMeta merge_meta(const std::vector<Trace>& traces, const std::vector<std::string>& files,
                     const MergeOptions& options) {
  TraceMeta m;
  const TraceMeta& first = traces.front().meta;
  m.tool = first.tool;
  m.torch = first.torch;
  m.argv = first.argv;
  m.created = first.created;
  m.updated = first.updated;
  m.status = common(
      traces, [](const Trace& t) { return t.meta.status; }, "differs between processes (merged_from)");
  m.hostname = common(
      traces, [](const Trace& t) { return t.meta.hostname; }, "several (merged_from)");
  const bool one_world = std::all_of(traces.begin(), traces.end(), [&](const Trace& t) {
    return t.meta.world_size && t.meta.world_size == first.world_size;
  });
  if (one_world) m.world_size = first.world_size;
  std::set<std::string> seen;
  for (size_t k = 0; k < traces.size(); ++k) {
    const TraceMeta& t = traces[k].meta;
    if (!t.created.empty()) m.created = m.created.empty() ? t.created : std::min(m.created, t.created);
    m.updated = std::max(m.updated, t.updated);
    m.calls += t.calls;
    m.untraced_calls += t.untraced_calls;
    Renumbering r;
    for (const auto& d : t.devices) {
      const std::string name = options.renumber_devices ? r(d.device) : d.device;
      if (seen.insert(name).second) m.devices.push_back({name, d.name});
    }
    if (t.merged_from.empty()) m.merged_from.push_back(process_of(traces[k], files[k]));
    else
      m.merged_from.insert(m.merged_from.end(), t.merged_from.begin(), t.merged_from.end());  // merged before
  }
  m.tracing = merge_tracing(traces);
  m.device_timing = merge_timing(traces);
  return m;
}

void check_mergeable(const std::vector<Trace>& traces, const std::vector<std::string>& files) {
  for (size_t k = 1; k < traces.size(); ++k) {
    const TraceMeta &a = traces.front().meta, &b = traces[k].meta;
    if (a.torch != b.torch || a.tool != b.tool)
      throw TraceMergeError(files[k] + " was traced with " + b.tool + " and torch " + b.torch + ", " + files.front() +
                            " with " + a.tool + " and torch " + a.torch + ": not processes of one program");
  }
  for (size_t k = 0; k < traces.size(); ++k)
    for (size_t j = 0; j < k; ++j) {
      const TraceMeta &a = traces[j].meta, &b = traces[k].meta;
      if (a.pid == b.pid && a.hostname == b.hostname && a.created == b.created && a.rank == b.rank)
        throw TraceMergeError(files[j] + " and " + files[k] + " are the same process (pid " + std::to_string(a.pid) +
                              " on " + (a.hostname.empty() ? "an unnamed host" : a.hostname) + ", started " +
                              a.created + "): a trace given twice?");
    }
}

}  // namespace

Trace merge_traces(const std::vector<Trace>& traces, const std::vector<std::string>& files,
                   const MergeOptions& options) {
  if (traces.empty()) throw TraceMergeError("no trace to merge");
  if (files.size() != traces.size()) throw TraceMergeError("merge_traces: one name per trace");
  check_mergeable(traces, files);
  std::vector<size_t> order(traces.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (std::all_of(traces.begin(), traces.end(), [](const Trace& t) { return t.meta.rank.has_value(); }))
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return *traces[a].meta.rank < *traces[b].meta.rank; });
  std::vector<Trace> sorted;
  std::vector<std::string> names;
  for (size_t k : order) {
    sorted.push_back(traces[k]);
    names.push_back(files[k]);
  }
  Trace out;
  out.meta = merge_meta(sorted, names, options);
  out.ops = merge_entries(sorted, options);
  return out;
}

}  // namespace bb::trace
