#include "replay/parts/shard.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace bb::replay {
namespace {

// The digits of `text`, as a number; nullopt-like false for anything else (signs, spaces, overflow).
bool whole_number(const std::string& text, size_t& out) {
  if (text.empty() || text.size() > 9) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<size_t>(c - '0');
  }
  return true;
}

size_t element_size(const std::string& dtype) {
  if (dtype == "complex128") return 16;
  if (dtype == "float64" || dtype == "int64" || dtype == "uint64" || dtype == "complex64") return 8;
  if (dtype == "float32" || dtype == "int32" || dtype == "uint32" || dtype == "qint32") return 4;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16" || dtype == "uint16" || dtype == "complex32")
    return 2;
  return 1;  // bool, 8-bit and sub-byte types
}

uint64_t bytes_of(const trace::TensorMeta& t) {
  if (t.symbolic) return 0;
  uint64_t n = 1;
  for (int64_t s : t.shape) n = __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n) ? UINT64_MAX : n;
  return n > UINT64_MAX / 16 ? UINT64_MAX / 16 : n * element_size(t.dtype);
}

// Tunable guesses (microseconds): what a case costs whatever it does (messages, meta-tensor checks),
// per byte of its data in the checks (inputs made, deep copies, comparisons, the float64 reference:
// tens of passes), and per byte and per run of a timed run (fresh inputs, cache eviction, the call).
constexpr double kCaseUs = 2000, kCheckUsPerByte = 0.01, kRunUs = 100, kRunUsPerByte = 0.005;

// The data a variant works on, from the traced call's: empty and 0-dim tensors hold next to nothing,
// odd sizes little, the noncontiguous variant's buffers are twice as wide.
double variant_bytes(double traced, const std::string& variant) {
  if (variant == "empty" || variant == "scalar") return 0;
  if (variant == "odd-size") return std::min(traced, 64.0 * 1024);
  if (variant == "noncontiguous") return 2 * traced;
  return traced;
}

}  // namespace

ShardSpec parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  ShardSpec s;
  if (slash == std::string::npos || !whole_number(text.substr(0, slash), s.k) ||
      !whole_number(text.substr(slash + 1), s.n))
    throw std::invalid_argument("--shard " + text + ": expected K/N, two whole numbers (0/4 is the first of 4 parts)");
  if (s.n == 0) throw std::invalid_argument("--shard " + text + ": N, the number of parts, must be at least 1");
  if (s.k >= s.n)
    throw std::invalid_argument("--shard " + text + ": K counts from 0 and must be below N = " + std::to_string(s.n) +
                                " (a Slurm array for it starts at 0: --array=0-" + std::to_string(s.n - 1) + ")");
  return s;
}

uint64_t tensor_bytes(const std::vector<trace::ArgValue>& args) {
  uint64_t total = 0;
  for (const auto& a : args)
    for (const auto& t : a.tensors)
      if (t) total = std::min(total + bytes_of(*t), UINT64_MAX / 4);
  return total;
}

uint64_t case_cost(const trace::TraceEntry& entry, const std::string& variant, const CostModel& model) {
  const double bytes = variant_bytes(static_cast<double>(tensor_bytes(entry.args)), variant);
  double us = kCaseUs + kCheckUsPerByte * bytes;
  if (model.timed && variant == "traced") {
    const auto& d = entry.device_time;
    const double call_us = d && d->calls ? static_cast<double>(d->total_ns) / 1000.0 / static_cast<double>(d->calls)
                                         : kRunUsPerByte * bytes;
    const double run_us = kRunUs + kRunUsPerByte * bytes + call_us;
    const double runs = 2.0 * (std::max(model.repetitions, 1) + 2);  // both sides, two warm-ups each
    // bbreplay stops after 5 pairs once the budget is spent
    us += std::min(runs * run_us, std::max(model.budget_seconds * 1e6, 14 * run_us));
  }
  return us >= 1e18 ? uint64_t{1000000000000000000} : static_cast<uint64_t>(std::llround(us));
}

std::vector<size_t> assign_parts(const std::vector<uint64_t>& costs, size_t n) {
  if (n == 0) throw std::invalid_argument("assign_parts: no parts");
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<uint64_t> load(n, 0);
  std::vector<size_t> part(costs.size());
  for (size_t i : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    part[i] = least;
    load[least] = costs[i] > UINT64_MAX - load[least] ? UINT64_MAX : load[least] + costs[i];
  }
  return part;
}

std::vector<size_t> shard_cases(const std::vector<uint64_t>& costs, const ShardSpec& spec) {
  const std::vector<size_t> part = assign_parts(costs, spec.n);
  std::vector<size_t> out;
  for (size_t i = 0; i < part.size(); ++i)
    if (part[i] == spec.k) out.push_back(i);
  return out;
}

}  // namespace bb::replay
