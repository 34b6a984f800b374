#include "replay/spent.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstring>

namespace bb::replay {
namespace {

thread_local Spent* g_innermost = nullptr;
thread_local bool g_sealed = false;
thread_local std::vector<std::pair<std::string, double>> g_spent;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void charge(const char* phase, double seconds) {
  for (auto& [name, s] : g_spent)
    if (std::strcmp(name.c_str(), phase) == 0) {
      s += seconds;
      return;
    }
  g_spent.emplace_back(phase, seconds);
}

}  // namespace

Spent::Spent(const char* phase, bool sealed) {
  if (g_sealed) return;  // inside a sealed scope: inert
  phase_ = phase;
  sealed_ = sealed;
  g_sealed = sealed;
  start_ = now();
  outer_ = g_innermost;
  g_innermost = this;
}

Spent::~Spent() {
  if (!phase_) return;
  const double total = now() - start_;
  charge(phase_, total - nested_);
  if (outer_) outer_->nested_ += total;
  g_innermost = outer_;
  if (sealed_) g_sealed = false;
}

std::vector<std::pair<std::string, double>> Spent::take() {
  std::vector<std::pair<std::string, double>> out;
  out.swap(g_spent);
  return out;
}

void Spent::charge_within(const char* phase, double seconds) {
  if (g_sealed || !(seconds > 0)) return;
  charge(phase, seconds);
  if (g_innermost) g_innermost->nested_ += seconds;
}

void Spent::charge_remote(const std::vector<std::pair<std::string, double>>& spent, double waited) {
  if (g_sealed) return;
  double room = std::max(0.0, waited);
  for (const auto& [name, seconds] : spent) {
    const char* const* k = std::find_if(std::begin(phase::kAll), std::end(phase::kAll),
                                        [&](const char* p) { return std::strcmp(p, name.c_str()) == 0; });
    if (k == std::end(phase::kAll) || !(seconds > 0)) continue;  // (NaN too)
    const double s = std::min(seconds, room);
    if (!(s > 0)) continue;
    room -= s;
    charge(*k, s);
    if (g_innermost) g_innermost->nested_ += s;
  }
}

}  // namespace bb::replay
