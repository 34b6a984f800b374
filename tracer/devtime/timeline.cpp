#include "tracer/devtime/timeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <set>
#include <unordered_map>

namespace bb::devtime {
namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class Writer {
 public:
  Writer(std::ostream& out, uint64_t base) : out_(out), base_(base) {}

  std::string us(uint64_t ns) const {  // µs after the base, 3 decimals (ns precision)
    const uint64_t d = ns >= base_ ? ns - base_ : 0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIu64 ".%03" PRIu64, d / 1000, d % 1000);
    return buf;
  }
  std::string dur(uint64_t start, uint64_t end) const {
    const uint64_t d = end > start ? end - start : 0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIu64 ".%03" PRIu64, d / 1000, d % 1000);
    return buf;
  }
  void event(const std::string& body) {
    out_ << (first_ ? "\n  " : ",\n  ") << '{' << body << '}';
    first_ = false;
  }

 private:
  std::ostream& out_;
  uint64_t base_;
  bool first_ = true;
};

const char* category(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::Kernel: return "kernel";
    case ActivityKind::Memcpy: return "gpu_memcpy";
    case ActivityKind::Memset: return "gpu_memset";
  }
  return "kernel";
}

}  // namespace

void write_timeline(std::ostream& out, const Collector::Timeline& ev, const TimelineInfo& info) {
  uint64_t base = UINT64_MAX;
  for (const auto& o : ev.ops) base = std::min(base, o.start);
  for (const auto& a : ev.api) base = std::min(base, a.start);
  for (const auto& [a, ext] : ev.activities) base = std::min(base, a.start);
  if (base == UINT64_MAX) base = 0;

  // CUPTI names host threads by their truncated pthread id; ops know both ids.
  std::unordered_map<uint32_t, uint32_t> tid_of;
  for (const auto& o : ev.ops) tid_of.emplace(o.pthread, o.thread);
  auto host_tid = [&](uint32_t cupti_thread) {
    auto it = tid_of.find(cupti_thread);
    return it == tid_of.end() ? cupti_thread : it->second;
  };
  std::unordered_map<uint32_t, const ApiCall*> api_of;
  for (const auto& a : ev.api) api_of.emplace(a.correlation, &a);

  const std::string pid = std::to_string(info.pid);
  out << "{\n\"schemaVersion\": 1,\n\"traceName\": " << quoted(info.trace_name)
      << ",\n\"displayTimeUnit\": \"ms\",\n\"baseTimeNanoseconds\": " << base
      << ",\n\"bbshim\": {\"dropped_events\": " << ev.dropped_events << "},\n\"traceEvents\": [";
  Writer w(out, base);

  std::set<uint32_t> threads;
  std::set<std::pair<uint32_t, uint32_t>> streams;
  for (const auto& o : ev.ops) {
    threads.insert(o.thread);
    const OpLabel* l = info.label ? info.label(signature_of(o.external)) : nullptr;
    std::string args = "\"External id\": " + std::to_string(o.external & kSerialMask);
    if (l) args += ", \"Input Dims\": " + l->input_dims + ", \"Input type\": " + l->input_types;
    w.event("\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": " +
            quoted(l ? l->name : "signature " + std::to_string(signature_of(o.external))) + ", \"pid\": " + pid +
            ", \"tid\": " + std::to_string(o.thread) + ", \"ts\": " + w.us(o.start) +
            ", \"dur\": " + w.dur(o.start, o.end) + ", \"args\": {" + args + "}");
  }
  for (const auto& a : ev.api) {
    const uint32_t tid = host_tid(a.thread);
    threads.insert(tid);
    auto ext = ev.external_of.find(a.correlation);
    std::string args = "\"correlation\": " + std::to_string(a.correlation);
    if (ext != ev.external_of.end()) args += ", \"External id\": " + std::to_string(ext->second & kSerialMask);
    const bool driver = a.name.rfind("cu", 0) == 0 && a.name.rfind("cuda", 0) != 0;
    w.event(std::string("\"ph\": \"X\", \"cat\": \"") + (driver ? "cuda_driver" : "cuda_runtime") +
            "\", \"name\": " + quoted(a.name) + ", \"pid\": " + pid + ", \"tid\": " + std::to_string(tid) +
            ", \"ts\": " + w.us(a.start) + ", \"dur\": " + w.dur(a.start, a.end) + ", \"args\": {" + args + "}");
  }
  for (const auto& [a, ext] : ev.activities) {
    streams.insert({a.device, a.stream});
    std::string args = "\"External id\": " + std::to_string(ext & kSerialMask) +
                       ", \"correlation\": " + std::to_string(a.correlation) +
                       ", \"device\": " + std::to_string(a.device) + ", \"stream\": " + std::to_string(a.stream);
    if (a.kind == ActivityKind::Kernel) {
      args += ", \"grid\": [" + std::to_string(a.grid[0]) + ", " + std::to_string(a.grid[1]) + ", " +
              std::to_string(a.grid[2]) + "], \"block\": [" + std::to_string(a.block[0]) + ", " +
              std::to_string(a.block[1]) + ", " + std::to_string(a.block[2]) + "]";
    } else {
      args += ", \"bytes\": " + std::to_string(a.bytes);
    }
    const std::string dev = std::to_string(a.device), stream = std::to_string(a.stream);
    w.event(std::string("\"ph\": \"X\", \"cat\": \"") + category(a.kind) + "\", \"name\": " + quoted(demangle(a.name)) +
            ", \"pid\": " + dev + ", \"tid\": " + stream + ", \"ts\": " + w.us(a.start) +
            ", \"dur\": " + w.dur(a.start, a.end) + ", \"args\": {" + args + "}");
    auto launch = api_of.find(a.correlation);
    if (launch == api_of.end()) continue;
    const std::string id = std::to_string(a.correlation);
    w.event("\"ph\": \"s\", \"id\": " + id + ", \"pid\": " + pid +
            ", \"tid\": " + std::to_string(host_tid(launch->second->thread)) +
            ", \"ts\": " + w.us(launch->second->start) + ", \"cat\": \"ac2g\", \"name\": \"ac2g\"");
    w.event("\"ph\": \"f\", \"id\": " + id + ", \"pid\": " + dev + ", \"tid\": " + stream +
            ", \"ts\": " + w.us(a.start) + ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"");
  }
  w.event("\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"args\": {\"name\": \"host\"}");
  std::set<uint32_t> devices;
  for (const auto& [d, s] : streams) devices.insert(d);
  for (uint32_t d : devices)
    w.event("\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + std::to_string(d) +
            ", \"args\": {\"name\": \"GPU " + std::to_string(d) + "\"}");
  for (const auto& [d, s] : streams)
    w.event("\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + std::to_string(d) +
            ", \"tid\": " + std::to_string(s) + ", \"args\": {\"name\": \"stream " + std::to_string(s) + "\"}");
  for (uint32_t t : threads)
    w.event("\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": " + std::to_string(t) +
            ", \"args\": {\"name\": \"thread " + std::to_string(t) + "\"}");
  out << "\n]\n}\n";
}

}  // namespace bb::devtime
