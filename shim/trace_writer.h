// Turns the tracer's counts into a trace file: at exit, on signals and periodically.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "shim/output_path.h"
#include "tracer/cuda_support.h"
#include "tracer/format/trace_model.h"
#include "tracer/trace_store.h"

namespace bb::shim {

struct RunInfo {
  std::string torch_version;
  std::string created;  // UTC ISO 8601
  ProcessIdentity id;
  std::string hostname;
  std::vector<std::string> argv;
};

RunInfo current_run_info(const std::string& torch_version);

// Builds the trace for `snap` (devices get their names where the CUDA part knows them), with device
// times per entry and the timing's health in meta when `times` is given and a CUDA device was used,
// and how tracing was sampled when `tracing` is given (its calls_seen from `snap`).
trace::Trace make_trace(const tracer::Snapshot& snap, const RunInfo& run, const std::string& status,
                        const tracer::DeviceTimeSnapshot* times = nullptr, const trace::TracingInfo* tracing = nullptr);

// Writes the Chrome-trace timeline of the events recorded, labelling ops from `snap`. Returns an error
// text, empty on success.
std::string write_timeline_file(const std::string& path, const tracer::Snapshot& snap,
                                const devtime::Collector::Timeline& events, const RunInfo& run);

class TraceWriter {
 public:
  // `timeline_path`: where the final write also writes the timeline ("" = none).
  TraceWriter(const tracer::TraceStore* store, std::string path, RunInfo run, std::string timeline_path = "");

  // Writes the current counts with meta.status = `status` (running, exited, signal SIGTERM).
  // Skipped when nothing was traced, or for a periodic write when nothing changed. After a `final`
  // write, later calls do nothing. A failure is reported once on stderr; returns false. Nothing
  // escapes it: it runs on the preload's own thread and at exit, where an exception would end the
  // program (an internal error is reported like a failed write).
  bool write(const std::string& status, bool final);

  const std::string& path() const { return path_; }

  // Whether a write has put a trace file on disk yet.
  bool wrote_file() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_calls_ > 0;
  }

 private:
  bool write_unguarded(const std::string& status, bool final);

  std::mutex mu_;
  const tracer::TraceStore* store_;
  std::string path_;
  RunInfo run_;
  std::string timeline_path_;
  uint64_t last_calls_ = 0;
  bool finished_ = false;
};

}  // namespace bb::shim
