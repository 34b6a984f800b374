#include "tracer/device_timer.h"

#include <pthread.h>

namespace bb::devtime {
namespace {

constexpr int kMaxDepth = 256;

// The calls this thread pushed, for the timeline's op events.
struct OpStack {
  uint64_t external[kMaxDepth];
  uint64_t start[kMaxDepth];
  int depth = 0;
};
thread_local OpStack t_ops;

}  // namespace

DeviceTimer::DeviceTimer(std::unique_ptr<CuptiApi> api, CollectorOptions options, Warn warn)
    : api_(std::move(api)), collector_(options), timeline_(options.timeline), warn_(std::move(warn)) {}

bool DeviceTimer::start(const std::string& conflict) {
  std::lock_guard<std::mutex> lock(control_);
  if (active_.load() || !off_.empty() || forgotten_.load() || finished_) return active_.load();
  if (!conflict.empty()) {
    off_ = conflict;
  } else if (!api_) {
    off_ = "CUPTI is not available";
  } else {
    collector_.begin(api_->now());
    std::string err = api_->enable(&collector_);
    if (err.empty()) {
      started_ = true;
      active_.store(true);
      return true;
    }
    api_->disable();
    off_ = err;
  }
  warn_("device timing is off: " + off_ + " (op shapes and counts are still traced)");
  return false;
}

bool DeviceTimer::op_start(uint32_t sig) {
  if (!active_.load(std::memory_order_relaxed)) return false;
  const uint64_t external = make_external_id(sig, serial_.fetch_add(1, std::memory_order_relaxed) + 1);
  api_->push(external);
  if (timeline_ && t_ops.depth < kMaxDepth) {
    t_ops.external[t_ops.depth] = external;
    t_ops.start[t_ops.depth] = api_->now();
  }
  ++t_ops.depth;
  return true;
}

void DeviceTimer::op_end() {
  if (forgotten_.load(std::memory_order_relaxed)) return;
  const int d = --t_ops.depth;
  if (finished_.load(std::memory_order_relaxed)) return;
  api_->pop();
  if (timeline_ && d >= 0 && d < kMaxDepth && active_.load(std::memory_order_relaxed)) {
    OpEvent e;
    e.external = t_ops.external[d];
    e.thread = this_thread_id();
    e.pthread = static_cast<uint32_t>(::pthread_self());
    e.start = t_ops.start[d];
    e.end = api_->now();
    collector_.add_op(e);
  }
}

void DeviceTimer::taken_over(const std::string& what) {
  std::lock_guard<std::mutex> lock(control_);
  if (!active_.load() || forgotten_.load()) return;
  active_.store(false);
  // Ours, in our clock, before the other client changes anything. The forced flush returns work
  // still running with no end time: those calls are left out, not timed short.
  api_->flush(false);
  collector_.end_round(false);
  api_->flush(true);
  collector_.end_round(true);
  api_->disable();
  collector_.stop(what + "; device times after this point were not recorded");
  warn_("device timing stopped: " + what +
        ". Device times in the trace cover the run up to this point only.");
}

void DeviceTimer::round() {
  std::lock_guard<std::mutex> lock(control_);
  if (!active_.load() || forgotten_.load() || finished_) return;
  api_->flush(false);
  collector_.end_round(false);
}

void DeviceTimer::finish() {
  std::lock_guard<std::mutex> lock(control_);
  if (forgotten_.load() || finished_) return;
  const bool was_active = active_.exchange(false);
  if (was_active) {
    api_->flush(false);
    collector_.end_round(false);
    api_->flush(true);  // still-running work comes back with end == 0: dropped and counted
    collector_.end_round(true);
    api_->disable();
  }
  finished_.store(true);
}

void DeviceTimer::forget() {
  forgotten_.store(true);
  active_.store(false);
}

std::string DeviceTimer::status() const {
  std::lock_guard<std::mutex> lock(control_);
  if (!off_.empty()) return "off: " + off_;
  Health h = collector_.health();
  if (!h.stopped.empty()) return "stopped: " + h.stopped;
  return started_ ? "on" : "off: no CUDA device was used";
}

}  // namespace bb::devtime
