// Turns the tracer's counts into a trace file: at exit, on signals and periodically.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "shim/output_path.h"
#include "tracer/trace_model.h"
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

// Builds the trace for `snap` (devices get their names where the CUDA part knows them).
trace::Trace make_trace(const tracer::Snapshot& snap, const RunInfo& run, const std::string& status);

class TraceWriter {
 public:
  TraceWriter(const tracer::TraceStore* store, std::string path, RunInfo run);

  // Writes the current counts with meta.status = `status` (running, exited, signal SIGTERM).
  // Skipped when nothing was traced, or for a periodic write when nothing changed. After a `final`
  // write, later calls do nothing. A failure is reported once on stderr; returns false.
  bool write(const std::string& status, bool final);

  const std::string& path() const { return path_; }

 private:
  std::mutex mu_;
  const tracer::TraceStore* store_;
  std::string path_;
  RunInfo run_;
  uint64_t last_calls_ = 0;
  bool finished_ = false;
};

}  // namespace bb::shim
