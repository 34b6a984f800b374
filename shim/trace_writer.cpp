#include "shim/trace_writer.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>

#include "shim/atomic_file.h"
#include "tracer/cuda_support.h"
#include "tracer/log.h"
#include "tracer/trace_yaml.h"

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

trace::Trace make_trace(const tracer::Snapshot& snap, const RunInfo& run, const std::string& status) {
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
  t.ops = snap.entries;
  return t;
}

TraceWriter::TraceWriter(const tracer::TraceStore* store, std::string path, RunInfo run)
    : store_(store), path_(std::move(path)), run_(std::move(run)) {}

bool TraceWriter::write(const std::string& status, bool final) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return true;
  finished_ = final;
  tracer::collect_device_ranges(final);
  tracer::Snapshot snap = store_->snapshot();
  if (snap.calls == 0 && snap.untraced_calls == 0) return true;  // nothing ran: leave no file
  if (!final && status == "running" && snap.calls == last_calls_) return true;
  last_calls_ = snap.calls;
  std::string err = write_file_atomic(path_, trace::to_yaml(make_trace(snap, run_, status)));
  if (err.empty()) {
    log::debug("wrote " + path_ + " (" + std::to_string(snap.entries.size()) + " signatures, " +
               std::to_string(snap.calls) + " calls, " + status + ")");
    return true;
  }
  log::warn_once("write:" + path_, "cannot write the trace: " + err + " (the program continues)");
  return false;
}

}  // namespace bb::shim
