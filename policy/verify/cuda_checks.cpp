#include "policy/verify/cuda_checks.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace bb::verify {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string joined(const std::set<std::string>& names, size_t most = 3) {
  std::string s;
  size_t k = 0;
  for (const auto& n : names) {
    if (k == most) {
      s += ", ... (" + std::to_string(names.size()) + " in all)";
      break;
    }
    s += (k++ ? ", " : "") + (n.size() > 100 ? n.substr(0, 97) + "..." : n);
  }
  return s;
}

}  // namespace

bool library_kernel(const std::string& name) {
  const std::string n = lower(name);
  for (const char* p :
       {"cublas", "cudnn", "cutlass", "xmma", "nvjet", "gemmsn_", "gemv2", "gemvx", "cufft", "splitkreduce",
        "ampere_sgemm", "ampere_hgemm", "volta_sgemm", "volta_hgemm", "turing_sgemm", "turing_hgemm"})
    if (n.find(p) != std::string::npos) return true;
  return false;
}

double speed_of_light_us(double bytes, double bytes_per_us) {
  return bytes > 0 && bytes_per_us > 0 ? bytes / bytes_per_us : 0.0;
}

Findings inspect(const Window& w) {
  Findings f;
  std::ostringstream esc;
  int late = 0;
  uint64_t latest = 0;
  std::set<uint32_t> late_streams;
  for (const auto& a : w.activities) {
    if (a.end > w.t_joined + kJoinSlackNs) {
      ++late;
      latest = std::max(latest, a.end - w.t_joined);
      late_streams.insert(a.stream);
    }
  }
  if (late) {
    esc << late << " kernel(s)/copies kept running after the caller's stream had finished (up to " << latest / 1000
        << " us later, stream";
    for (uint32_t s : late_streams) esc << " " << s;
    esc << "): work on a stream the caller does not wait for";
  }
  int foreign = 0, after = 0;
  for (const auto& l : w.launches) {
    if (l.thread != w.caller_thread) ++foreign;
    if (l.time > w.t_return) ++after;
  }
  if (foreign) esc << (esc.tellp() > 0 ? "; " : "") << foreign << " launch(es) from another host thread";
  if (after) esc << (esc.tellp() > 0 ? "; " : "") << after << " launch(es) after the call had returned";
  f.escaping = esc.str();
  if (!w.environment.empty()) {
    std::set<std::string> names(w.environment.begin(), w.environment.end());
    f.tampering = "called " + joined(names) + " during the call (changes what timing and results depend on)";
  }
  // (every launch makes one record; a library's launch of nothing makes none: cuBLAS's bf16 addmm made 2
  // launches and 1 record on the H200, 2026-12-04. So: no record at all, or more than a quarter missing.)
  const size_t launched = w.launches.size(), recorded = w.activities.size();
  if (launched > recorded && (recorded == 0 || (launched - recorded >= 2 && 4 * (launched - recorded) > launched)))
    f.blinded = "CUPTI recorded " + std::to_string(recorded) + " kernels, copies and sets of the " +
                std::to_string(launched) + " launched: its records were switched off around some";
  std::set<std::string> libs;
  for (const auto& a : w.activities)
    if (library_kernel(a.name)) libs.insert(a.name);
  if (!libs.empty()) f.library = "launched vendor-library kernels: " + joined(libs);
  return f;
}

}  // namespace bb::verify
