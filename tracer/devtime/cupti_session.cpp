#include "tracer/devtime/cupti_session.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <thread>

namespace bb::devtime {
namespace {

constexpr int kMaxDepth = 256;
// How long closing a window waits for a launch to detach CUPTI at (none comes in an idle program:
// CUPTI then stays attached, with its records off, until the next window).
constexpr uint32_t kDetachWaitMs = 20;

// The calls this thread pushed: their ids, start times (timeline) and the sampling epoch they began in.
// Zero-initialized, so that it needs no initialization guard, and reached through thread_ops(). The
// ids and the depth are read by the thread that ends collection rounds (running_calls): a call's
// records are not final while it runs (plain stores and loads on x86).
struct OpStack {
  std::atomic<uint64_t> external[kMaxDepth] = {};
  uint64_t start[kMaxDepth] = {};
  uint64_t epoch[kMaxDepth] = {};
  bool wanted[kMaxDepth] = {};  // first-calls: its signature wanted it timed, and a window was open at its start
  std::atomic<int> depth{0};
  bool listed = false;  // in stacks()
};
thread_local OpStack t_ops;

// This thread's stack, its address taken once per call: in the preload every access to a thread_local
// is a call to __tls_get_addr, which the compiler otherwise repeats at each use (it would rather
// compute the address again than keep it in a register across the atomics and virtual calls).
[[gnu::noinline]] OpStack& thread_ops() { return t_ops; }

// Op call serials, process-wide: a call left on a stack by a session that is gone (a forked child's
// copy, a test's) never shares its id with a call of a later session.
std::atomic<uint64_t> g_serial{0};

// Every thread's stack, from its first followed call to its exit. Never destroyed: threads may end
// after static destructors ran.
std::mutex& stacks_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<OpStack*>& stacks() {
  static auto* v = new std::vector<OpStack*>;
  return *v;
}
struct Listed {
  OpStack* ops;
  explicit Listed(OpStack* s) : ops(s) {
    std::lock_guard<std::mutex> lock(stacks_mu());
    stacks().push_back(ops);
  }
  ~Listed() {
    std::lock_guard<std::mutex> lock(stacks_mu());
    auto& v = stacks();
    v.erase(std::remove(v.begin(), v.end(), ops), v.end());
  }
};
[[gnu::noinline]] void list_stack(OpStack& ops) {
  static thread_local Listed listed(&ops);
  ops.listed = true;
}

// The ids of the calls running now, on every thread (Collector::RunningCalls). A thread may push or
// pop meanwhile: a call that begins now has no records from earlier rounds, one that ends is final a
// round later.
void running_calls(std::vector<uint64_t>& ids) {
  std::lock_guard<std::mutex> lock(stacks_mu());
  for (const OpStack* s : stacks()) {
    const int n = std::min(s->depth.load(std::memory_order_acquire), kMaxDepth);
    for (int i = 0; i < n; ++i) ids.push_back(s->external[i].load(std::memory_order_relaxed));
  }
}

}  // namespace

Sampling Sampling::windows(uint32_t on_ms, uint32_t period_ms) {
  Sampling s;
  s.mode = Mode::Windows;
  s.on_ms = on_ms;
  s.period_ms = period_ms;
  return s;
}

Sampling Sampling::first_calls(uint32_t calls, uint32_t refresh_ms, uint32_t repeat_gap_ms) {
  Sampling s;
  s.mode = Mode::FirstCalls;
  s.calls = calls;
  s.refresh_ms = refresh_ms;
  s.repeat_gap_ms = repeat_gap_ms;
  return s;
}

const char* Sampling::mode_name() const {
  switch (mode) {
    case Mode::FirstCalls: return "first-calls";
    case Mode::Windows: return "windows";
    case Mode::All: break;
  }
  return "all";
}

std::string Sampling::describe() const {
  switch (mode) {
    case Mode::Windows: return std::to_string(on_ms) + " ms of every " + std::to_string(period_ms) + " ms";
    case Mode::FirstCalls:
      return "first " + std::to_string(calls) + " calls of each signature" +
             (refresh_ms == 0          ? std::string()
              : refresh_ms % 1000 == 0 ? ", one more every " + std::to_string(refresh_ms / 1000) + " s"
                                       : ", one more every " + std::to_string(refresh_ms) + " ms");
    case Mode::All: break;
  }
  return "";
}

CuptiSession::CuptiSession(std::unique_ptr<CuptiApi> api, CollectorOptions options, Warn warn, Sampling sampling)
    : api_(std::move(api)),
      collector_(options),
      timeline_(options.timeline),
      warn_(std::move(warn)),
      sampling_(sampling),
      skip_unwanted_(sampling.enabled() && !options.timeline && api_ && api_->links_untracked()) {
  if (sampling_.mode == Sampling::Mode::FirstCalls)
    wants_ = std::make_unique<SignatureWants>(sampling_.calls, sampling_.repeat_gap_ms, sampling_.is_variant);
  collector_.set_running_calls(&running_calls);
  if (wants_)
    collector_.set_lost_credit([](void* wants, uint32_t sig) { static_cast<SignatureWants*>(wants)->uncredit(sig); },
                               wants_.get());
}

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
      started_at_ = last_progress_at_ = last_wanted_at_ = last_first_sight_open_ = std::chrono::steady_clock::now();
      next_refresh_ = started_at_ + std::chrono::milliseconds(sampling_.refresh_ms);
      windows_.store(1);
      active_.store(true);
      note_locked("open: start");
      return true;
    }
    api_->disable();
    off_ = err;
  }
  warn_("device timing is off: " + off_ + " (op shapes and counts are still traced)");
  return false;
}

bool CuptiSession::op_start(uint32_t sig, bool whole) {
  if (!active_.load(std::memory_order_relaxed)) return false;
  // First-calls: a call its signature wants timed opens the window itself, before it launches anything.
  bool wanted = false;
  if (wants_ && sig != kNoSignature) {
    const SignatureWants::Want w = wants_->wants(sig);
    if (w != SignatureWants::Want::No && (epoch_.load() & 1) == 0) open_for_call(w == SignatureWants::Want::Again);
    wanted = w != SignatureWants::Want::No;
  }
  const uint64_t epoch = epoch_.load();
  if (!wanted && skip_unwanted_ && (epoch & 1) == 0) return false;
  // Outside an open window the records are off, or being switched on or off kind by kind: what such
  // a call has recorded may be part of it only, so none of it is ever timed (it is flagged, and its
  // launches are counted as untracked). A window opening or closing during a call cuts it (op_end).
  uint64_t external = make_external_id(sig, g_serial.fetch_add(1, std::memory_order_relaxed) + 1);
  if ((epoch & 1) == 0 || !whole) external |= kBetweenWindows;
  api_->push(external);
  OpStack& ops = thread_ops();
  if (!ops.listed) list_stack(ops);
  const int d = ops.depth.load(std::memory_order_relaxed);
  if (d < kMaxDepth) {
    ops.external[d].store(external, std::memory_order_relaxed);
    ops.epoch[d] = epoch;
    // The window stays open while a wanted call that began in it runs (closing would cut it).
    ops.wanted[d] = wanted && (ops.epoch[d] & 1) != 0;
    if (ops.wanted[d]) {
      wanted_in_flight_.fetch_add(1, std::memory_order_relaxed);
      wanted_began_.fetch_add(1, std::memory_order_relaxed);
    }
    if (timeline_) ops.start[d] = api_->now();
  }
  ops.depth.store(d + 1, std::memory_order_release);
  return true;
}

void CuptiSession::op_end() {
  if (forgotten_.load(std::memory_order_relaxed)) return;
  OpStack& ops = thread_ops();
  const int d = ops.depth.load(std::memory_order_relaxed) - 1;
  ops.depth.store(d, std::memory_order_release);
  if (finished_.load(std::memory_order_relaxed)) return;
  api_->pop();
  // A window opened or closed during the call: part of its work was launched while CUPTI recorded
  // nothing. (Past kMaxDepth nesting this cannot be told; such calls are kept.)
  if (sampling_.enabled() && d >= 0 && d < kMaxDepth) {
    if (ops.wanted[d]) wanted_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    const uint64_t began = ops.epoch[d];
    const uint64_t external = ops.external[d].load(std::memory_order_relaxed);
    if (epoch_.load() != began) {
      collector_.exclude(external);
    } else if (wants_ && (external & kBetweenWindows) == 0) {  // began in an open window, whole
      bool counted = false;
      if (wants_->credit(signature_of(external), &counted)) progress_.fetch_add(1, std::memory_order_relaxed);
      if (counted) collector_.credited(external);  // wanted again if left out after all
    }
  }
  if (timeline_ && d >= 0 && d < kMaxDepth && active_.load(std::memory_order_relaxed)) {
    OpEvent e;
    e.external = ops.external[d].load(std::memory_order_relaxed);
    e.thread = this_thread_id();
    e.pthread = static_cast<uint32_t>(::pthread_self());
    e.start = ops.start[d];
    e.end = api_->now();
    collector_.add_op(e);
  }
}

// Attaching costs the calling thread milliseconds: a call opens a window itself only while what
// attaching and detaching took stays within 2% of the time since timing started (plus 50 ms);
// otherwise the sampler opens it when the budget allows, and that call is not timed.
bool CuptiSession::within_budget(std::chrono::steady_clock::time_point now) const {
  const auto since = std::chrono::duration_cast<std::chrono::nanoseconds>(now - started_at_).count();
  return static_cast<double>(control_ns_.load()) <= 0.02 * static_cast<double>(since) + 50e6;
}

// A signature not known to repeat may never come again (a step-dependent scalar makes a new one
// every step): its call opens a window at most once per first_sight_gap_ms (the first window counts),
// and asks the sampler for none (it would open after the call). A repeating one that wants more
// opens it, or has the sampler open it for its next call.
void CuptiSession::open_for_call(bool repeats) {
  std::unique_lock<std::mutex> lock(control_, std::try_to_lock);
  const auto now = std::chrono::steady_clock::now();
  if (lock.owns_lock() && !repeats &&
      now - last_first_sight_open_ < std::chrono::milliseconds(sampling_.first_sight_gap_ms))
    return;
  if (lock.owns_lock() && !closing_ && active_.load() && !finished_ && within_budget(now)) {
    if ((epoch_.load() & 1) == 0 && open_locked(repeats ? "repeating call" : "first sight") && !repeats)
      last_first_sight_open_ = now;
    return;
  }
  if (repeats) open_wanted_.store(true);
}

void CuptiSession::taken_over(const std::string& what) {
  std::lock_guard<std::mutex> lock(control_);
  if (!active_.load() || forgotten_.load()) return;
  stop_locked(what);
}

void CuptiSession::stop_locked(const std::string& why) {
  active_.store(false);
  note_locked("stopped: " + why);
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

void CuptiSession::add_control_time(std::chrono::steady_clock::time_point since) {
  control_ns_.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
}

void CuptiSession::note_locked(std::string what) {
  if (!sampling_.enabled() || events_.size() >= kMaxEvents) return;
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  events_.push_back({static_cast<double>(us) / 1e6, std::move(what)});
}

std::vector<WindowEvent> CuptiSession::events() const {
  std::lock_guard<std::mutex> lock(control_);
  return events_;
}

bool CuptiSession::open_locked(const char* why) {
  // Recording on before calls can see the window (calls that begin meanwhile are never timed).
  const auto t0 = std::chrono::steady_clock::now();
  const bool attach = api_->detached();
  if (attach) collector_.forget_correlations();  // before any new launch is linked
  std::string err = attach ? api_->attach() : api_->record(true);
  if (attach) add_control_time(t0);
  if (!err.empty()) {
    stop_locked("sampled timing could not open a window: " + err);
    return false;
  }
  open_mark_ = api_->last_linked();
  last_progress_at_ = last_wanted_at_ = std::chrono::steady_clock::now();
  last_progress_ = progress_.load();
  last_began_ = wanted_began_.load();
  epoch_.fetch_add(1);
  windows_.fetch_add(1);
  note_locked(std::string("open: ") + why + (attach ? " (attached)" : ""));
  return true;
}

bool CuptiSession::window(bool open, std::chrono::steady_clock::time_point drain_until, const char* why) {
  uint32_t close_mark = 0;
  {
    std::lock_guard<std::mutex> lock(control_);
    if (!active_.load() || forgotten_.load() || finished_) return false;
    if (((epoch_.load() & 1) != 0) == open) return true;  // already so
    if (open) return open_locked(why);
    // Closing: the window ends for the calls first; whatever they launch from then on is theirs to
    // lose (they are cut), not a short time. Calls that begin while the records are going off are
    // cut as well (the second step).
    epoch_.fetch_add(1);
    note_locked(std::string("close: ") + why);
    close_mark = api_->last_linked();
    if (std::string err = api_->record(false); !err.empty()) {
      stop_locked("sampled timing could not close a window: " + err);
      return false;
    }
    epoch_.fetch_add(2);
    if (!api_->can_detach()) return true;
    closing_ = true;
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
  closing_ = false;
  if (!active_.load() || forgotten_.load() || finished_) {
    collector_.hold_rounds(false);
    return false;
  }
  api_->flush(true);
  collector_.hold_rounds(false);
  collector_.end_round(false);
  const auto t0 = std::chrono::steady_clock::now();
  if (api_->detach(kDetachWaitMs)) {
    detaches_.fetch_add(1);
    add_control_time(t0);
    note_locked("detached");
  } else {
    note_locked("not detached: no launch within " + std::to_string(kDetachWaitMs) +
                " ms (attached, records off, until the next window)");
  }
  return true;
}

std::string CuptiSession::signature_name(uint32_t sig) const {
  return sampling_.name_of ? sampling_.name_of(sig) : "signature " + std::to_string(sig);
}

// Which repeating signatures held the window: the first kShown, with what they still want and when
// they were first and last seen (the events' clock, seconds).
std::string CuptiSession::short_repeating_text() const {
  const uint64_t n = wants_->short_repeating();
  if (n == 0) return "";
  auto seconds = [this](uint32_t ms) {
    const auto t = wants_->base() + std::chrono::milliseconds(ms);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", std::chrono::duration<double>(t.time_since_epoch()).count());
    return std::string(buf);
  };
  std::string out = "; still short: ";
  const auto list = wants_->short_repeating_list(kShown);
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& s = list[i];
    if (i) out += ", ";
    out += signature_name(s.sig);
    out += " (" + std::to_string(s.owed) + " more; seen first at " + seconds(s.first_ms) + ", last at " +
           seconds(s.last_ms) + ")";
  }
  if (n > list.size()) out += " and " + std::to_string(n - list.size()) + " more";
  return out;
}

// A repeating signature short of calls holds the window only while it may still come: once nothing
// wanted ran for kLinger, those not seen for more than twice their gap (plus kLinger) stop counting as
// repeating (the first step's lazy initialization makes some that never come back; they held the first
// window open for kPatience, on the small Llama 6 steps at every-call cost). A signature's gap: the
// longest between its wanted calls, at most the longest any repeating signature's wanted calls showed
// over the last kRecentGaps to 2 kRecentGaps (about the loop's period: gaps seen in a first step that
// took a second say little about it). One that comes back repeats again at once. Looked for at most
// once per kLinger.
void CuptiSession::retire_absent_locked(std::chrono::steady_clock::time_point now) {
  if (now - gap_taken_at_ >= kRecentGaps) {
    gap_before_ = wants_->take_recent_gap();
    gap_taken_at_ = now;
  }
  if (wants_->short_repeating() == 0 || wanted_in_flight_.load() > 0 || now - last_progress_at_ < kLinger ||
      now - last_wanted_at_ < kLinger || now - last_retire_look_ < kLinger)
    return;
  last_retire_look_ = now;
  std::vector<uint32_t> shown;
  // A signature's own gaps may come from a slow first step: no longer than the loop's recent ones.
  const uint32_t cap = std::max(gap_before_, wants_->recent_gap());
  const size_t n = wants_->retire_absent(now, static_cast<uint32_t>(kLinger.count()), cap, kShown, &shown);
  if (n == 0) return;
  std::string what = "retired " + std::to_string(n) + " repeating signature" + (n == 1 ? "" : "s") +
                     " not seen for over twice their gap: ";
  for (size_t i = 0; i < shown.size(); ++i) what += (i ? ", " : "") + signature_name(shown[i]);
  if (n > shown.size()) what += " and " + std::to_string(n - shown.size()) + " more";
  note_locked(what);
}

bool CuptiSession::tick(std::chrono::steady_clock::time_point now) {
  if (!wants_) return active_.load();
  std::string why;
  {
    std::lock_guard<std::mutex> lock(control_);
    if (!active_.load() || forgotten_.load() || finished_) return false;
    if (sampling_.refresh_ms && now >= next_refresh_) {
      wants_->refresh();
      next_refresh_ = now + std::chrono::milliseconds(sampling_.refresh_ms);
    }
    if ((epoch_.load() & 1) == 0) {
      // Closed: open if a call asked for it (and the budget allows), else wait for one.
      if (!open_wanted_.load() || !within_budget(now)) return true;
      open_wanted_.store(false);
      return open_locked("asked by a call");
    }
    open_wanted_.store(false);
    const uint64_t p = progress_.load();
    if (p != last_progress_) {
      last_progress_ = p;
      last_progress_at_ = now;
    }
    if (const uint64_t b = wanted_began_.load(); b != last_began_) {
      last_began_ = b;
      last_wanted_at_ = now;
    }
    retire_absent_locked(now);
    // Open: while a repeating signature wants more (it comes back next step; closing and attaching
    // again costs more than a step's gap), while other wanted calls keep coming (or the first window is
    // young), or while a wanted call is running; closed after kPatience without a repeating
    // signature's timed call whatever runs. The first window counts that from the first repeat (a
    // program's first step, with its lazy initialization, can take longer), kFirstPatience at most.
    const bool looping = windows_.load() > 1 || wants_->repeating() > 0 || now - started_at_ >= kFirstPatience;
    const bool quiet = looping && now - last_progress_at_ >= kPatience;
    const bool may_close = wanted_in_flight_.load() <= 0 && (windows_.load() > 1 || now - started_at_ >= kPatience);
    const bool none_wanted = wants_->short_of() == 0;
    const bool settled =
        may_close && (none_wanted || (wants_->short_repeating() == 0 && now - last_wanted_at_ >= kLinger));
    if (!quiet && !settled) return true;
    why = settled ? (none_wanted ? "no signature wants more"
                                 : "no wanted call for " + std::to_string(kLinger.count()) + " ms")
                  : "no repeating signature timed for " + std::to_string(kPatience.count()) + " ms" +
                        short_repeating_text();
  }
  return window(false, now + kDrain, why.c_str());
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
