#include "replay/workers/memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>

namespace bb::replay {

std::optional<uint64_t> parse_bytes(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  if (unit.size() >= 2 && unit.compare(unit.size() - 2, 2, "iB") == 0) unit.resize(unit.size() - 2);  // GiB
  else if (!unit.empty() && unit.back() == 'B')
    unit.pop_back();  // GB, B
  double scale = 1;
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    return std::nullopt;
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes >= 18446744073709551615.0) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  std::ostringstream s;
  if (u == 0) s << bytes << " B";
  else
    s << std::fixed << std::setprecision(v < 10 ? 2 : v < 100 ? 1 : 0) << v << " " << units[u];
  return s.str();
}

uint64_t available_host_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

namespace {
// What this process already holds of what RLIMIT_DATA counts (VmData of /proc/self/status), 0 when unknown.
uint64_t data_bytes_now() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmData:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  return 0;
}
}  // namespace

std::string limit_process_memory(uint64_t bytes) {
  struct rlimit r {};
  if (::getrlimit(RLIMIT_DATA, &r) != 0) return std::string("getrlimit: ") + std::strerror(errno);
  bytes += data_bytes_now();
  if (r.rlim_max != RLIM_INFINITY && r.rlim_max < bytes) bytes = r.rlim_max;  // (a lower hard limit stays)
  r.rlim_cur = bytes;
  if (::setrlimit(RLIMIT_DATA, &r) != 0) return std::string("setrlimit: ") + std::strerror(errno);
  return "";
}

std::string host_limit_note(const std::string& what) {
  static const char* const kFailedAllocation[] = {"can't allocate memory", "bad_alloc", "Cannot allocate memory",
                                                  "MemoryError"};
  if (std::none_of(std::begin(kFailedAllocation), std::end(kFailedAllocation),
                   [&](const char* m) { return what.find(m) != std::string::npos; }))
    return "";
  struct rlimit r {};
  if (::getrlimit(RLIMIT_DATA, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return "";
  return " (this process may hold " + format_bytes(r.rlim_cur) +
         " of host memory: its half of bbreplay's --worker-memory, plus what it held when it started; a larger "
         "--worker-memory, or 0 for no limit, lets such a case run)";
}

}  // namespace bb::replay
