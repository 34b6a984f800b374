#include "tracer/devtime/collector.h"

#include <cxxabi.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace bb::devtime {

uint32_t this_thread_id() {
  thread_local uint32_t tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
}

std::string demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

// ------------------------------------------------------------------ Sketch

uint32_t Sketch::bucket_of(uint64_t ns) {
  if (ns < 64) return static_cast<uint32_t>(ns);  // exact below 64 ns
  const int msb = 63 - __builtin_clzll(ns);
  const uint64_t sub = (ns >> (msb - 6)) & 63;
  return 64 + static_cast<uint32_t>(msb - 6) * 64 + static_cast<uint32_t>(sub);
}

uint64_t Sketch::bucket_mid(uint32_t bucket) {
  if (bucket < 64) return bucket;
  const uint32_t octave = (bucket - 64) / 64, sub = (bucket - 64) % 64;
  const uint64_t lower = (uint64_t{64} + sub) << octave;
  return lower + ((uint64_t{1} << octave) >> 1);
}

void Sketch::add(uint64_t ns) {
  ++count_;
  total_ += ns;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
  if (exact_.size() < kExact && count_ == exact_.size() + 1) exact_.push_back(ns);
  else
    exact_.clear();
  ++buckets_[bucket_of(ns)];
}

uint64_t Sketch::median() const {
  if (count_ == 0) return 0;
  if (exact_.size() == count_) {
    std::vector<uint64_t> v = exact_;
    std::sort(v.begin(), v.end());
    return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
  }
  const uint64_t want = (count_ + 1) / 2;
  uint64_t seen = 0;
  for (const auto& [bucket, n] : buckets_) {
    seen += n;
    if (seen >= want) return std::clamp(bucket_mid(bucket), min_, max_);
  }
  return max_;
}

// ------------------------------------------------------------------ Collector

Collector::Collector(CollectorOptions options) : options_(options) {}

void Collector::begin(uint64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  begin_ = now;
  begun_ = true;
}

bool Collector::clock_ok(const DeviceActivity& a, uint64_t now) const {
  const uint64_t slack = options_.clock_slack_ns;
  const uint64_t earliest = begin_ > slack ? begin_ - slack : 0;
  return a.end >= a.start && a.start >= earliest && a.end <= now + slack;
}

void Collector::add_external(uint32_t correlation, uint64_t external) {
  std::lock_guard<std::mutex> lock(mu_);
  if (health_.stopped.empty()) link(correlation, external);
}

void Collector::add_externals(const std::vector<std::pair<uint32_t, uint64_t>>& links) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty()) return;
  for (const auto& [correlation, external] : links) link(correlation, external);
}

void Collector::link(uint32_t correlation, uint64_t external) {
  if (first_link_ == 0 || correlation < first_link_) first_link_ = correlation;
  Link& l = links_[correlation];
  l = {external, round_};
  if (options_.timeline && timeline_.external_of.size() < options_.timeline_max_events)
    timeline_.external_of[correlation] = external;
  auto w = waiting_.find(correlation);
  if (w == waiting_.end()) return;
  l.matched = true;
  for (const auto& a : w->second.activities)
    if (a.end == 0) leave_out(external);  // came back unfinished before its link did
    else
      attribute(a, external);
  waiting_.erase(w);
}

void Collector::leave_out(uint64_t external) {
  if (external == kUntrackedCall || (external & kBetweenWindows)) {  // no call of ours to leave out
    ++health_.untracked_launches;
  } else if (incomplete_.emplace(external, round_).second) {
    pending_.erase(external);
    ++health_.calls_incomplete;
    if (credited_.erase(external) && lost_) lost_(lost_user_, signature_of(external));
  }
}

void Collector::credited(uint64_t external) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty()) return;
  auto it = incomplete_.find(external);
  if (it == incomplete_.end()) credited_.emplace(external, round_);
  else if (lost_)  // left out before it ended (a forced flush of a still-running call)
    lost_(lost_user_, signature_of(external));
}

void Collector::add_api(ApiCall call) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty() || !options_.timeline) return;
  if (timeline_.api.size() < options_.timeline_max_events) timeline_.api.push_back(std::move(call));
  else
    ++timeline_.dropped_events;
}

void Collector::add_op(const OpEvent& op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty() || !options_.timeline) return;
  if (timeline_.ops.size() < options_.timeline_max_events) timeline_.ops.push_back(op);
  else
    ++timeline_.dropped_events;
}

void Collector::add_activity(DeviceActivity a, uint64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty()) return;
  if (a.end == 0) {
    ++health_.unfinished;
    if (!options_.attribute) return;
    auto link = links_.find(a.correlation);
    if (link != links_.end()) leave_out(link->second.external);
    else  // its link may still be in a launching thread's hands: it leaves its call out when it comes
      wait_for_link(std::move(a));
    return;
  }
  if (!begun_ || !clock_ok(a, now)) {
    ++health_.bad_clock;
    pending_.clear();
    waiting_.clear();
    health_.stopped =
        "a device record's timestamps are not in the clock this session started with (another CUPTI "
        "client changed the timestamp source?); device times recorded after this are discarded";
    return;
  }
  if (!options_.attribute) {
    unattributed(a);
    return;
  }
  auto link = links_.find(a.correlation);
  if (link != links_.end()) {
    link->second.matched = true;
    attribute(a, link->second.external);
  } else {
    wait_for_link(std::move(a));
  }
}

void Collector::wait_for_link(DeviceActivity a) {
  auto& w = waiting_[a.correlation];
  w.round = round_;
  w.activities.push_back(std::move(a));
}

void Collector::keep_activity(const DeviceActivity& a, uint64_t external) {
  if (!options_.timeline) return;
  if (timeline_.activities.size() < options_.timeline_max_events) timeline_.activities.emplace_back(a, external);
  else
    ++timeline_.dropped_events;
}

void Collector::exclude(uint64_t external) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty()) return;
  if (!incomplete_.emplace(external, round_).second) return;
  pending_.erase(external);
  ++health_.calls_cut;
}

void Collector::attribute(const DeviceActivity& a, uint64_t external) {
  ++health_.activities;
  if (external == kUntrackedCall || (external & kBetweenWindows)) {
    ++health_.untracked_launches;
    if (external != kUntrackedCall && external != kOpeningLaunch)
      keep_activity(a, external);  // an op's work all the same
    return;
  }
  if (incomplete_.count(external)) return;
  const uint64_t dur = a.end - a.start;
  PendingCall& call = pending_[external];
  call.total += dur;
  call.round = round_;
  const uint32_t sig = signature_of(external);
  if (sig != kNoSignature) {
    auto d = demangled_.find(a.name);
    if (d == demangled_.end()) d = demangled_.emplace(a.name, demangle(a.name)).first;
    ++sigs_[sig].kernels[d->second];
  }
  keep_activity(a, external);
}

void Collector::unattributed(const DeviceActivity& a) {
  ++health_.activities;
  ++health_.unattributed;
  health_.unattributed_ns += a.end - a.start;
  const std::string name = demangle(a.name);
  auto it = health_.unattributed_names.find(name);
  if (it != health_.unattributed_names.end()) ++it->second;
  else if (health_.unattributed_names.size() < 64)
    health_.unattributed_names.emplace(name, 1);
  else
    ++health_.unattributed_names["(other)"];
  keep_activity(a, 0);
}

void Collector::unlinked(const DeviceActivity& a) {
  // (seen on an H100 under sampled timing, 2026-12-07 and 2026-12-08: one cuBLAS gemm of some 2,800
  // timed calls with no link, now and then, in a program that launches only inside ops)
  if (reattached_ && first_link_ != 0 && a.correlation < first_link_) attribute(a, kOpeningLaunch);
  else
    unattributed(a);
}

void Collector::add_dropped(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  health_.dropped += n;
}

void Collector::add_overhead(uint64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ++health_.overhead_records;
  health_.overhead_ns += ns;
}

size_t Collector::unmatched_links(uint32_t after, uint32_t upto) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [correlation, l] : links_)
    if (!l.matched && l.external != kOpeningLaunch && correlation > after && correlation <= upto) ++n;
  return n;
}

void Collector::settle(bool all, const std::vector<uint64_t>& running) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (all || round_ - it->second.round >= 2) {
      for (const auto& a : it->second.activities)
        if (a.end != 0) unlinked(a);  // an unfinished one was counted as such when it came
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    const bool runs = std::binary_search(running.begin(), running.end(), it->first);
    if (runs && all) {  // at a takeover or the end: what it launched from here on is not recorded
      const uint64_t external = it->first;
      it = pending_.erase(it);
      leave_out(external);
    } else if (!runs && (all || round_ - it->second.round >= 2)) {
      const uint32_t sig = signature_of(it->first);
      if (sig != kNoSignature) {
        sigs_[sig].per_call.add(it->second.total);
        ++health_.calls_timed;
      }
      credited_.erase(it->first);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = credited_.begin(); it != credited_.end();) {  // calls with no records (no device work)
    if (all || round_ - it->second >= 8) it = credited_.erase(it);
    else
      ++it;
  }
  for (auto it = incomplete_.begin(); it != incomplete_.end();) {
    if (all || round_ - it->second >= 8) it = incomplete_.erase(it);
    else
      ++it;
  }
  for (auto it = links_.begin(); it != links_.end();) {
    // A matched launch's further records (a graph's kernels) come with its first; an unmatched one's
    // may be far behind.
    if (all || round_ - it->second.round >= (it->second.matched ? 2u : 8u)) it = links_.erase(it);
    else
      ++it;
  }
}

void Collector::forget_correlations() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty()) return;
  for (auto& [correlation, w] : waiting_)
    for (const auto& a : w.activities)
      if (a.end != 0) unlinked(a);
  waiting_.clear();
  links_.clear();
  reattached_ = true;
  first_link_ = 0;
}

void Collector::end_round(bool final) {
  // Taken before mu_: the stacks' lock is never held with it.
  std::vector<uint64_t> running;
  if (running_) running_(running);
  std::sort(running.begin(), running.end());
  std::lock_guard<std::mutex> lock(mu_);
  if (held_ && !final) return;
  if (health_.stopped.empty()) settle(final, running);
  ++round_;
}

void Collector::hold_rounds(bool held) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = held;
}

void Collector::stop(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_.stopped.empty()) return;
  health_.stopped = why;
  pending_.clear();
  waiting_.clear();
  links_.clear();
  incomplete_.clear();
  credited_.clear();
}

bool Collector::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !health_.stopped.empty();
}

std::map<uint32_t, SignatureTime> Collector::by_signature() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sigs_;
}

Health Collector::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

Collector::Timeline Collector::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}

Collector::Timeline Collector::take_timeline() {
  std::lock_guard<std::mutex> lock(mu_);
  Timeline t = std::move(timeline_);
  timeline_ = Timeline{};
  return t;
}

uint64_t busy_ns(std::vector<std::pair<uint64_t, uint64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  uint64_t total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;
    if (!open || s > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = s;
      cur_end = e;
      open = true;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

}  // namespace bb::devtime
