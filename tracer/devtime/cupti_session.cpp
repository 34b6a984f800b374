#include "tracer/devtime/cupti_session.h"

#include <pthread.h>

#include <thread>

namespace bb::devtime {
namespace {

constexpr int kMaxDepth = 256;
// How long closing a window waits for a launch to detach CUPTI at (none comes in an idle program:
// CUPTI then stays attached, with its records off, until the next window).
constexpr uint32_t kDetachWaitMs = 20;

// The calls this thread pushed: their ids, start times (timeline) and the sampling epoch they began in.
struct OpStack {
  uint64_t external[kMaxDepth];
  uint64_t start[kMaxDepth];
  uint64_t epoch[kMaxDepth];
  int depth = 0;
};
thread_local OpStack t_ops;

}  // namespace

std::string Sampling::describe() const {
  if (!enabled()) return "";
  return std::to_string(on_ms) + " ms of every " + std::to_string(period_ms) + " ms";
}

CuptiSession::CuptiSession(std::unique_ptr<CuptiApi> api, CollectorOptions options, Warn warn, Sampling sampling)
    : api_(std::move(api)),
      collector_(options),
      timeline_(options.timeline),
      warn_(std::move(warn)),
      sampling_(sampling) {}

bool CuptiSession::start(const std::string& conflict) {
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
      windows_.store(1);
      active_.store(true);
      return true;
    }
    api_->disable();
    off_ = err;
  }
  warn_("device timing is off: " + off_ + " (op shapes and counts are still traced)");
  return false;
}

bool CuptiSession::op_start(uint32_t sig) {
  if (!active_.load(std::memory_order_relaxed)) return false;
  const uint64_t external = make_external_id(sig, serial_.fetch_add(1, std::memory_order_relaxed) + 1);
  api_->push(external);
  if (t_ops.depth < kMaxDepth) {
    t_ops.external[t_ops.depth] = external;
    t_ops.epoch[t_ops.depth] = epoch_.load();
    if (timeline_) t_ops.start[t_ops.depth] = api_->now();
  }
  ++t_ops.depth;
  return true;
}

void CuptiSession::op_end() {
  if (forgotten_.load(std::memory_order_relaxed)) return;
  const int d = --t_ops.depth;
  if (finished_.load(std::memory_order_relaxed)) return;
  api_->pop();
  // A window opened or closed during the call: part of its work was launched while CUPTI recorded
  // nothing. (Past kMaxDepth nesting this cannot be told; such calls are kept.)
  if (sampling_.enabled() && d >= 0 && d < kMaxDepth && epoch_.load() != t_ops.epoch[d])
    collector_.exclude(t_ops.external[d]);
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

void CuptiSession::taken_over(const std::string& what) {
  std::lock_guard<std::mutex> lock(control_);
  if (!active_.load() || forgotten_.load()) return;
  stop_locked(what);
}

void CuptiSession::stop_locked(const std::string& why) {
  active_.store(false);
  // Ours, in our clock, before the other client changes anything. The forced flush returns work
  // still running with no end time: those calls are left out, not timed short.
  api_->flush(false);
  collector_.end_round(false);
  api_->flush(true);
  collector_.end_round(true);
  api_->disable();
  collector_.stop(why + "; device times after this point were not recorded");
  warn_("device timing stopped: " + why + ". Device times in the trace cover the run up to this point only.");
}

void CuptiSession::round() {
  std::lock_guard<std::mutex> lock(control_);
  if (!active_.load() || forgotten_.load() || finished_) return;
  api_->flush(false);
  collector_.end_round(false);
}

bool CuptiSession::window(bool open, std::chrono::steady_clock::time_point drain_until) {
  uint32_t close_mark = 0;
  {
    std::lock_guard<std::mutex> lock(control_);
    if (!active_.load() || forgotten_.load() || finished_) return false;
    if (((epoch_.load() & 1) != 0) == open) return true;  // already so
    if (open) {
      // Recording on before calls can see the window.
      if (std::string err = api_->detached() ? api_->attach() : api_->record(true); !err.empty()) {
        stop_locked("sampled timing could not open a window: " + err);
        return false;
      }
      open_mark_ = api_->last_linked();
      epoch_.fetch_add(1);
      windows_.fetch_add(1);
      return true;
    }
    // Closing: the window ends for the calls first; whatever they launch from then on is theirs to
    // lose (they are cut), not a short time. Calls that begin while the records are going off are
    // cut as well (the second step).
    epoch_.fetch_add(1);
    close_mark = api_->last_linked();
    if (std::string err = api_->record(false); !err.empty()) {
      stop_locked("sampled timing could not close a window: " + err);
      return false;
    }
    epoch_.fetch_add(2);
    if (!api_->can_detach()) return true;
  }
  // The device may still be running the window's work: wait for its records (the lock is free
  // between looks), then collect everything, unfinished work as such (those calls are left out).
  // No call becomes final meanwhile: looking often must not make a quiet gap out of a busy device.
  collector_.hold_rounds(true);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(control_);
      if (!active_.load() || forgotten_.load() || finished_) break;
      api_->flush(false);
      if (collector_.unmatched_links(open_mark_, close_mark) == 0) break;
    }
    if (std::chrono::steady_clock::now() >= drain_until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> lock(control_);
  if (!active_.load() || forgotten_.load() || finished_) {
    collector_.hold_rounds(false);
    return false;
  }
  api_->flush(true);
  collector_.hold_rounds(false);
  collector_.end_round(false);
  if (api_->detach(kDetachWaitMs)) detaches_.fetch_add(1);
  return true;
}

void CuptiSession::finish() {
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

void CuptiSession::forget() {
  forgotten_.store(true);
  active_.store(false);
}

std::string CuptiSession::status() const {
  std::lock_guard<std::mutex> lock(control_);
  if (!off_.empty()) return "off: " + off_;
  Health h = collector_.health();
  if (!h.stopped.empty()) return "stopped: " + h.stopped;
  return started_ ? "on" : "off: no CUDA device was used";
}

}  // namespace bb::devtime
