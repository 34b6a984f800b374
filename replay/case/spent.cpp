#include "replay/case/spent.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace bb::replay {
namespace {

thread_local Spent* g_innermost = nullptr;
thread_local bool g_sealed = false;
thread_local std::vector<std::pair<std::string, double>> g_spent;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The profile by place (Spent::profiling()): what, file, line -> count, seconds.
struct Profile {
  std::mutex mutex;
  std::map<std::tuple<std::string, std::string, int>, std::pair<long, double>> sites;
  std::string path;
};

Profile* profile() {
  static Profile* p = [] {
    const char* prefix = std::getenv("BB_REPLAY_PROFILE");
    if (!prefix || !*prefix) return static_cast<Profile*>(nullptr);
    auto* made = new Profile;  // (never freed: written from exit handlers)
    // (pid and start time: a kernel's process is pid 1 of a namespace of its own, each time it restarts)
    made->path = std::string(prefix) + "." + std::to_string(::getpid()) + "-" +
                 std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".tsv";
    std::atexit([] { Spent::write_profile(); });
    return made;
  }();
  return p;
}

void record(const std::string& what, const char* file, int line, double seconds) {
  Profile* p = profile();
  if (!p || !file) return;
  const char* base = std::strrchr(file, '/');
  std::lock_guard<std::mutex> hold(p->mutex);
  auto& [count, total] = p->sites[{what, base ? base + 1 : file, line}];
  ++count;
  total += seconds;
}

void charge(const char* phase, double seconds) {
  if (std::strcmp(phase, phase::kUnnamed) == 0) return;
  for (auto& [name, s] : g_spent)
    if (std::strcmp(name.c_str(), phase) == 0) {
      s += seconds;
      return;
    }
  g_spent.emplace_back(phase, seconds);
}

}  // namespace

Spent::Spent(const char* phase, bool sealed, const char* file, int line) {
  if (g_sealed) return;  // inside a sealed scope: inert
  phase_ = phase;
  file_ = file;
  line_ = line;
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
  if (profile()) record(phase_, file_, line_, total - nested_);
  if (outer_) outer_->nested_ += total;
  g_innermost = outer_;
  if (sealed_) g_sealed = false;
}

std::vector<std::pair<std::string, double>> Spent::take() {
  std::vector<std::pair<std::string, double>> out;
  out.swap(g_spent);
  write_profile();
  return out;
}

void Spent::charge_within(const char* phase, double seconds, const char* file, int line) {
  if (g_sealed || !(seconds > 0)) return;
  charge(phase, seconds);
  if (profile()) record(phase, file, line, seconds);
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
    if (profile()) record(std::string("remote ") + *k, "(kernel worker)", 0, s);
    if (g_innermost) g_innermost->nested_ += s;
  }
}

double Spent::note_start() { return profile() ? now() : 0; }

void Spent::note(const char* what, double since, const char* file, int line) {
  if (since > 0) record(what, file, line, now() - since);
}

std::string Spent::profile_folder() {
  if (!profile()) return "";
  const std::string prefix = std::getenv("BB_REPLAY_PROFILE");
  const size_t slash = prefix.rfind('/');
  return slash == std::string::npos ? "" : prefix.substr(0, slash);
}

void Spent::write_profile() {
  Profile* p = profile();
  if (!p) return;
  std::lock_guard<std::mutex> hold(p->mutex);
  const std::string tmp = p->path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  std::fprintf(f, "what\tfile\tline\tcount\tseconds\n");
  for (const auto& [site, v] : p->sites)
    std::fprintf(f, "%s\t%s\t%d\t%ld\t%.6f\n", std::get<0>(site).c_str(), std::get<1>(site).c_str(),
                 std::get<2>(site), v.first, v.second);
  std::fclose(f);
  std::rename(tmp.c_str(), p->path.c_str());
}

}  // namespace bb::replay
