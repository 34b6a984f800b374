// The device-timing session: the CUPTI calls the preload makes, behind an interface (CuptiApi) so
// that the logic around them (when to start, push/pop per op, takeover by another CUPTI client,
// flush rounds, fork) is tested on machines without a GPU. The real CuptiApi is in
// tracer/devtime/cupti_library.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tracer/devtime/collector.h"
#include "tracer/devtime/signature_wants.h"

namespace bb::devtime {

class CuptiApi {
 public:
  virtual ~CuptiApi() = default;
  // Enables kernel, memcpy, memset and external-correlation records plus API records for the launch
  // calls only, with buffers whose records go to `sink` (one round per completed buffer). Returns
  // an error text, empty on success.
  virtual std::string enable(Collector* sink) = 0;
  virtual void disable() = 0;                // no more records of ours (what is buffered stays until a flush)
  virtual void push(uint64_t external) = 0;  // this thread's innermost op call is now `external`
  virtual void pop() = 0;
  virtual void flush(bool forced) = 0;  // completed (forced: all) buffers to the sink, before returning
  virtual uint64_t now() = 0;           // CUPTI's clock, ns
  // True when it holds CUPTI's one subscriber slot (then another client's cuptiSubscribe is a takeover).
  virtual bool uses_callbacks() const { return false; }
  // True when a launch made while recording inside an op call that was never pushed (it began between
  // windows, and op_start did not follow it) is tied to kUntrackedCall rather than to no op.
  virtual bool links_untracked() const { return false; }
  // Sampled timing: off, CUPTI records no kernel, memcpy or memset (work launched meanwhile never
  // gets a record) and launches are not tied to ops; on again after. Returns an error text.
  virtual std::string record(bool on) = 0;
  // Sampled timing between windows can detach CUPTI from the process (cuptiFinalize): with its
  // records merely off, CUPTI still costs each launch most of what recording does.
  virtual bool can_detach() const { return false; }
  // Detaches CUPTI at the exit of the next launch (on the launching thread: where NVIDIA says
  // cuptiFinalize is safe), waiting up to wait_ms for one. False, and still attached, if none came.
  virtual bool detach(uint32_t /*wait_ms*/) { return false; }
  virtual bool detached() const { return false; }
  // Attaches again: buffers, launch callbacks, linking and records. Returns an error text.
  virtual std::string attach() { return "CUPTI cannot be attached again"; }
  // The correlation id of the latest launch tied to an op (launch ids grow): before detaching,
  // sampled timing waits for the records of the window's launches up to this one.
  virtual uint32_t last_linked() const { return 0; }
  // "" while its subscriber still holds CUPTI's subscriber slot with its launch callbacks on; else what
  // changed (a client that unsubscribed it, or turned its callbacks off, would blind the watch).
  virtual std::string ownership() const { return ""; }
};

// Which calls are timed (docs/device-time.md).
//   All         BB_DEVICE_TIME=all: every call (a timeline needs it).
//   FirstCalls  the default: each signature's first `calls` calls, and one more of each every
//               refresh_ms; CUPTI is detached while no wanted call comes, and attached again when a
//               call of a repeating signature that wants timing starts (a first sight opens a window
//               at most once a second). A signature repeats once seen again repeat_gap_ms or more after
//               its first sight (signatures a single step makes and uses never do); a float variant
//               (is_variant) wants nothing until it repeats.
//   Windows     the calls inside a window of on_ms at the start of every period_ms
//               (BB_DEVICE_TIME_SAMPLE).
// Calls cut by a window's edge are left out (and counted), never timed short. Where the CuptiApi ties
// the launches of calls it was not told of to kUntrackedCall (links_untracked), a call that begins
// between windows and is not wanted is not followed at all (no id, no end hook): beyond tracing op
// shapes it costs a look at what its signature wants; what it launches after a window opens is left
// out and counted (Health::untracked_launches).
struct Sampling {
  enum class Mode { All, FirstCalls, Windows };
  Mode mode = Mode::All;
  uint32_t on_ms = 0, period_ms = 0;   // Windows
  uint32_t calls = 5;                  // FirstCalls: timed calls wanted per signature
  uint32_t refresh_ms = 10000;         // FirstCalls: each signature wants one more this often (0: never)
  uint32_t repeat_gap_ms = 0;          // FirstCalls: seen again this long after its first sight: repeats
  uint32_t first_sight_gap_ms = 1000;  // FirstCalls: a call not known to repeat opens a window at most this often
  // FirstCalls: whether a signature differs from an earlier one only in float scalars' values (null:
  // none does); such a one wants no timed calls until it repeats (signature_wants.h).
  bool (*is_variant)(uint32_t sig) = nullptr;
  // FirstCalls: a signature in words (op and arguments), for the events that say why a window stayed
  // open (null: its id).
  std::string (*name_of)(uint32_t sig) = nullptr;

  static Sampling windows(uint32_t on_ms, uint32_t period_ms);
  static Sampling first_calls(uint32_t calls, uint32_t refresh_ms, uint32_t repeat_gap_ms);
  bool enabled() const { return mode != Mode::All; }  // windows open and close
  const char* mode_name() const;                      // all | first-calls | windows
  std::string describe() const;  // "10 ms of every 100 ms", "first 5 calls of each signature, ...", or ""
};

// Sampled timing: what the windows did, for whoever asks why a run cost what it cost.
struct WindowEvent {
  double t = 0;      // CLOCK_MONOTONIC (steady_clock), seconds, to the microsecond
  std::string what;  // "open: start|first sight|repeating call|asked by a call|period" (+ " (attached)"),
                     // "close: <why>" (FirstCalls: "; still short: <signature> (...), ..."
                     // when repeating signatures still wanted calls), "detached", "not detached: <why>",
                     // "stopped: <why>"
};

class CuptiSession {
 public:
  using Warn = std::function<void(const std::string&)>;
  CuptiSession(std::unique_ptr<CuptiApi> api, CollectorOptions options, Warn warn, Sampling sampling = {});

  // Starts collecting unless `conflict` says why not (a profiler already holds CUPTI). Returns true
  // when collecting. Says once, through `warn`, why not.
  bool start(const std::string& conflict);
  bool active() const { return active_.load(std::memory_order_relaxed); }
  // Collecting, and every op call's start must reach op_start: every call is timed, or a window is
  // open (sampled tracing may switch the tracer off only otherwise).
  bool needs_every_call() const {
    return active() && (!sampling_.enabled() || (epoch_.load(std::memory_order_relaxed) & 1) != 0);
  }

  // Around each op call, on its thread. op_start returns true when it pushed an id; then op_end
  // must follow on the same thread (it pops even after timing stopped, to keep CUPTI's stack whole).
  // False: the call is not followed (timing is off, or it began between windows and is not wanted).
  // whole: every call inside this one reaches op_start too (false while sampled tracing sees one call
  // in N: the launches of calls inside it it did not see would count as its own, so it is never timed).
  bool op_start(uint32_t sig, bool whole = true);
  void op_end();

  // Another CUPTI client is about to replace our buffer callbacks or timestamps, or finalize CUPTI
  // (seen by the preload's interposers): collect what is ours now, then stop for good.
  void taken_over(const std::string& what);
  void round();  // periodic: completed buffers, one round
  // Sampled timing, from the sampler thread: opens (records again) or closes the window. The first
  // window opens with start(). Where CUPTI can be detached, closing then waits until drain_until
  // at most for the records of the window's launches (the device may run behind the host), collects
  // them and detaches CUPTI; opening attaches it again. `why` goes into events(). Returns false once
  // timing has stopped: the thread may end.
  bool window(bool open, std::chrono::steady_clock::time_point drain_until = {}, const char* why = "period");
  // FirstCalls, from the sampler thread every few milliseconds: refreshes what signatures want when
  // due, opens a window a call asked for, and closes the open one (the first window stays kPatience at
  // least) when no wanted call runs and either no signature wants more or, with no repeating
  // signature wanting more, no wanted call began for kLinger; or when no repeating signature was timed
  // for kPatience (a stream of signatures that never repeat does not hold a window; the first window
  // counts from the first repeat, kFirstPatience at most). So the first window stays open across the
  // first steps while their calls come, new or repeating, and closes once they have their calls: one
  // detach.
  // Returns false once timing has stopped.
  bool tick(std::chrono::steady_clock::time_point now);
  const Sampling& sampling() const { return sampling_; }
  uint64_t windows() const { return windows_.load(); }        // opened so far (the first included)
  uint64_t detaches() const { return detaches_.load(); }      // gaps between windows with CUPTI detached
  uint64_t control_ns() const { return control_ns_.load(); }  // spent attaching and detaching CUPTI
  // Sampled: windows opened and closed and CUPTI detached, in order: the first kMaxEvents.
  std::vector<WindowEvent> events() const;
  static constexpr size_t kMaxEvents = 1000;
  // FirstCalls: signatures seen, and how many of them want more timed calls now.
  uint64_t signatures_seen() const { return wants_ ? wants_->seen() : 0; }
  uint64_t signatures_short() const { return wants_ ? wants_->short_of() : 0; }
  static constexpr std::chrono::milliseconds kPatience{300};
  // The first window waits this long at most for a first repeating signature before kPatience applies.
  static constexpr std::chrono::milliseconds kFirstPatience{5000};
  // An open window with no wanted call beginning this long closes while only signatures not known to
  // repeat want more (those seen in one step only never come back).
  static constexpr std::chrono::milliseconds kLinger{20};
  static constexpr uint32_t kRepeatGapMs = 100;            // the preload's Sampling::repeat_gap_ms
  static constexpr std::chrono::milliseconds kDrain{100};  // FirstCalls: how long closing waits for records
  // FirstCalls: how recent the gaps that cap a signature's own must be (retire_absent_locked).
  static constexpr std::chrono::milliseconds kRecentGaps{200};
  void finish();  // at exit, before CUDA tears down: forced flush, final round; CUPTI untouched after
  void forget();  // in a forked child: never call CUPTI again

  // "on", "off: why" or "stopped: why".
  std::string status() const;
  bool uses_callbacks() const { return api_ && api_->uses_callbacks(); }
  const Collector& collector() const { return collector_; }
  Collector& collector() { return collector_; }

 private:
  void stop_locked(const std::string& why);  // control_ held: collect what is ours, stop for good, say so
  bool open_locked(const char* why);         // control_ held: a window opens (attaching CUPTI if detached)
  void note_locked(std::string what);        // control_ held: an event, if sampling and room
  void open_for_call(bool repeats);          // FirstCalls: a call that wants timing starts between windows
  bool within_budget(std::chrono::steady_clock::time_point now) const;
  void add_control_time(std::chrono::steady_clock::time_point since);    // attaching or detaching took since-now
  void retire_absent_locked(std::chrono::steady_clock::time_point now);  // FirstCalls, control_ held
  std::string short_repeating_text() const;                              // FirstCalls: "; still short: ..." or ""
  std::string signature_name(uint32_t sig) const;                        // Sampling::name_of's, or "signature <id>"
  static constexpr size_t kShown = 3;                                    // signatures an event names
  std::unique_ptr<CuptiApi> api_;
  Collector collector_;
  const bool timeline_;
  Warn warn_;
  const Sampling sampling_;
  const bool skip_unwanted_;  // sampled, no timeline, and the API links untracked calls' launches
  // Odd while a window is open (always, when not sampling): a call that sees it change was cut.
  std::atomic<uint64_t> epoch_{1};
  std::atomic<uint64_t> windows_{0};
  std::atomic<uint64_t> detaches_{0};
  uint32_t open_mark_ = 0;  // last_linked() as the window opened
  // FirstCalls.
  std::unique_ptr<SignatureWants> wants_;
  std::atomic<uint64_t> progress_{0};         // timed calls that repeating signatures wanted
  std::atomic<bool> open_wanted_{false};      // a call asked for a window the sampler opens
  std::atomic<int64_t> wanted_in_flight_{0};  // wanted calls running that began in an open window
  std::atomic<uint64_t> wanted_began_{0};     // wanted calls that began in an open window, so far
  std::atomic<uint64_t> control_ns_{0};
  bool closing_ = false;  // control_: a window is being closed (its records drained): none opens meanwhile
  std::chrono::steady_clock::time_point started_at_, next_refresh_, last_progress_at_, last_first_sight_open_;
  uint64_t last_progress_ = 0;  // progress_ as the sampler last saw it
  uint64_t last_began_ = 0;     // wanted_began_ as the sampler last saw it (at last_wanted_at_)
  std::chrono::steady_clock::time_point last_wanted_at_, last_retire_look_;
  std::chrono::steady_clock::time_point gap_taken_at_;  // recent gaps: the last take_recent_gap()
  uint32_t gap_before_ = 0;                             // what it took
  mutable std::mutex control_;                          // start / round / finish / taken_over / window
  std::atomic<bool> active_{false};
  std::atomic<bool> forgotten_{false};
  std::atomic<bool> finished_{false};
  bool started_ = false;
  std::string off_;                  // why timing never started
  std::vector<WindowEvent> events_;  // control_
};

}  // namespace bb::devtime
