// Device time per traced signature, from decoded CUPTI activity records. No torch, no CUPTI: the
// CUPTI layer (tracer/devtime/cupti_library.cpp) decodes its buffers into these records, and the unit tests feed
// them by hand.
//
// How a kernel finds its op: each op call gets an id that encodes its signature and a serial number.
// The CUPTI layer links each launch's correlation id to the id of the innermost op on the launching
// thread (add_external; in the default mode a callback on the launch calls does this, see
// tracer/devtime/cupti_library.h), and the kernel, memcpy or memset record carries the launch's correlation id.
//
// A call's device time is the sum of the durations of everything it launched. Records of one call can
// arrive in different buffers, so a call is final once it has had no new record for two processing
// rounds (a round = one batch of records: a completed buffer or a flush), and at the final flush.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace bb::devtime {

// External ids: the signature in the top 24 bits, kBetweenWindows, then a per-process call serial
// in the low 39 bits.
inline constexpr uint32_t kNoSignature = (1u << 24) - 1;  // an op call past the signature limit
inline constexpr uint64_t kSerialMask = (uint64_t{1} << 39) - 1;
// Sampled timing: the call began outside an open window (the records were off, or being switched on
// or off), or while sampled tracing saw one call in N (calls inside it may go unseen, their launches
// taken for its own). Whatever of such a call was recorded is left out and counted with the untracked
// launches: it may be part of the call only, or more than the call.
inline constexpr uint64_t kBetweenWindows = uint64_t{1} << 39;
constexpr uint64_t make_external_id(uint32_t sig, uint64_t serial) {
  return (static_cast<uint64_t>(sig & kNoSignature) << 40) | (serial & kSerialMask);
}
inline uint32_t signature_of(uint64_t external) { return static_cast<uint32_t>(external >> 40); }
// Sampled timing: the id of every launch made inside an op call that began between windows and so was
// not followed (no id of its own); its records are left out and counted (Health::untracked_launches).
inline constexpr uint64_t kUntrackedCall = make_external_id(kNoSignature, 0);  // real calls' serials start at 1
// Sampled timing: a launch made inside an op call whose entry callback saw the records off, and which
// found them on when it returned: a window opened while it was being made (the records go on after the
// link flag, so its kernel may have been recorded without a link). Left out and counted with the
// untracked launches, never taken for device work outside any op; it may have no record at all, so a
// window's close never waits for one.
inline constexpr uint64_t kOpeningLaunch = kUntrackedCall | kBetweenWindows;

enum class ActivityKind : uint8_t { Kernel, Memcpy, Memset };

// A kernel, memcpy or memset as it ran on the device. Times in CUPTI's clock (ns).
struct DeviceActivity {
  ActivityKind kind = ActivityKind::Kernel;
  uint32_t correlation = 0;
  uint64_t start = 0, end = 0;  // end 0: still running when a forced flush returned it
  uint32_t device = 0, stream = 0;
  std::string name;  // kernel: as CUPTI gives it (mangled); memcpy: "Memcpy HtoD", ...; memset: "Memset"
  int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t bytes = 0;  // memcpy/memset
};

// A launch call on the host (runtime or driver API), kept for the timeline.
struct ApiCall {
  uint32_t correlation = 0;
  uint64_t start = 0, end = 0;
  uint32_t thread = 0;  // as CUPTI reports it
  std::string name;     // cudaLaunchKernel, cuLaunchKernel, ...
};

// An op call on the host, kept for the timeline.
struct OpEvent {
  uint64_t external = 0;
  uint32_t thread = 0;   // the kernel's thread id (gettid)
  uint32_t pthread = 0;  // pthread_self(), truncated as CUPTI reports threads
  uint64_t start = 0, end = 0;
};

// Count, total, extremes and median of per-call times. The median is exact up to 64 samples, then
// read from a log histogram with 64 buckets per octave (within 0.8% of the true median).
class Sketch {
 public:
  void add(uint64_t ns);
  uint64_t count() const { return count_; }
  uint64_t total() const { return total_; }
  uint64_t min() const { return min_; }
  uint64_t max() const { return max_; }
  uint64_t median() const;

 private:
  static constexpr size_t kExact = 64;
  static uint32_t bucket_of(uint64_t ns);
  static uint64_t bucket_mid(uint32_t bucket);
  uint64_t count_ = 0, total_ = 0, min_ = UINT64_MAX, max_ = 0;
  std::vector<uint64_t> exact_;           // while count_ <= kExact
  std::map<uint32_t, uint64_t> buckets_;  // always
};

struct SignatureTime {
  Sketch per_call;                          // device time of each timed call
  std::map<std::string, uint64_t> kernels;  // launched activity names (kernels demangled) -> launches
};

struct Health {
  uint64_t activities = 0;          // device records accepted
  uint64_t unfinished = 0;          // returned by a forced flush before they ended (end == 0): dropped
  uint64_t calls_incomplete = 0;    // calls with such a record: not timed (their sum would be short)
  uint64_t calls_cut = 0;           // sampled timing: followed calls a window opened or closed during: not timed
  uint64_t untracked_launches = 0;  // sampled timing: launches of calls begun between windows (kUntrackedCall)
  uint64_t dropped = 0;             // records CUPTI itself dropped (buffers full)
  uint64_t bad_clock = 0;           // records outside the session's clock range: timing stopped
  uint64_t unattributed = 0;        // device activity launched outside any traced op call
  uint64_t unattributed_ns = 0;
  std::map<std::string, uint64_t> unattributed_names;  // at most 64 names; the rest under "(other)"
  uint64_t calls_timed = 0;
  uint64_t overhead_records = 0;  // CUPTI's own overhead records (buffer flushes, instrumentation, ...)
  uint64_t overhead_ns = 0;       // and the time they say CUPTI spent
  std::string stopped;            // why timing stopped; empty while it runs
};

struct CollectorOptions {
  bool attribute = true;                       // false: no op ids are pushed; every activity is unattributed at once
  bool timeline = false;                       // keep activities and API calls for a timeline
  size_t timeline_max_events = 1000000;        // per kind (ops, API calls, device activities)
  uint64_t clock_slack_ns = 5'000'000'000ull;  // tolerance of the clock check
};

// Turns records into per-signature statistics. Thread-safe.
class Collector {
 public:
  explicit Collector(CollectorOptions options = {});

  // Collection starts; `now` is CUPTI's clock at that moment. Records must fall after it.
  void begin(uint64_t now);

  // One batch of records (a completed buffer), then the end of the round. `now` = CUPTI's clock.
  void add_external(uint32_t correlation, uint64_t external);
  void add_externals(const std::vector<std::pair<uint32_t, uint64_t>>& links);
  void add_api(ApiCall call);
  void add_activity(DeviceActivity activity, uint64_t now);
  void add_dropped(uint64_t n);
  void add_overhead(uint64_t ns);  // one of CUPTI's overhead records
  void add_op(const OpEvent& op);  // timeline only
  // Sampled timing: this call ran while a window opened or closed, so some of its work was not
  // recorded: it is left out (what it has, and what still comes for it) and counted in calls_cut.
  void exclude(uint64_t external);
  // Launches tied to an op with a correlation id in (after, upto] whose device record has not come
  // yet: sampled timing waits for them before it detaches CUPTI.
  size_t unmatched_links(uint32_t after, uint32_t upto) const;
  // Ends a round: calls without new records for two rounds become final, unless still running; with
  // `final`, all do, and those still running are left out (part of their work is not recorded).
  void end_round(bool final);
  // Where the op calls still running are (the ids on every thread's stack of calls): a call's records
  // so far are not the whole call while it runs (null: none is known to run).
  using RunningCalls = void (*)(std::vector<uint64_t>& ids);
  void set_running_calls(RunningCalls running) { running_ = running; }
  // First-calls timing: this call counted towards what its signature wants (SignatureWants::credit).
  // If it is left out after all (a record of it came back unfinished), `lost` is told its signature.
  using LostCredit = void (*)(void* user, uint32_t sig);
  void set_lost_credit(LostCredit lost, void* user) { lost_ = lost, lost_user_ = user; }
  void credited(uint64_t external);
  // CUPTI is about to be attached again after a detach (which came after every record of the last
  // window was collected): its correlation ids may start over, so no launch link or early record of
  // before may meet a new one. Links left are dropped; records left without a link are unattributed.
  // From then on, a record without a link whose correlation id is below every id linked since is a
  // launch that was under way as CUPTI came back (its entry callback never ran): an untracked launch,
  // like kOpeningLaunch, not work outside any op.
  void forget_correlations();
  // While held, rounds do not end (short of a final one): sampled timing looks for a window's
  // records many times in a row, and no call may become final between two looks.
  void hold_rounds(bool held);

  // Stops timing for good: pending calls are discarded, later records ignored; settled statistics
  // stay. The first reason is kept.
  void stop(const std::string& why);
  bool stopped() const;

  std::map<uint32_t, SignatureTime> by_signature() const;
  Health health() const;

  struct Timeline {
    std::vector<OpEvent> ops;
    std::vector<ApiCall> api;
    std::vector<std::pair<DeviceActivity, uint64_t>> activities;  // with their external id (0: none)
    std::unordered_map<uint32_t, uint64_t> external_of;           // launch correlation -> external id
    uint64_t dropped_events = 0;                                  // past timeline_max_events
  };
  Timeline timeline() const;
  Timeline take_timeline();  // and start a new one

 private:
  struct PendingCall {
    uint64_t total = 0;
    uint64_t round = 0;  // last round that added to it
  };
  struct Link {
    uint64_t external;
    uint64_t round;
    bool matched = false;  // its record came
  };
  void link(uint32_t correlation, uint64_t external);          // mu_ held
  void attribute(const DeviceActivity& a, uint64_t external);  // mu_ held
  void unattributed(const DeviceActivity& a);                  // mu_ held
  void unlinked(const DeviceActivity& a);                      // mu_ held: no link ever came
  // mu_ held: part of this call's work is not recorded (a record came back unfinished, or it runs at the end).
  void leave_out(uint64_t external);
  void wait_for_link(DeviceActivity a);  // mu_ held: a record that came before its launch's link
  void keep_activity(const DeviceActivity& a, uint64_t external);  // mu_ held: into the timeline, if one is kept
  void settle(bool all, const std::vector<uint64_t>& running);     // mu_ held; running: sorted
  bool clock_ok(const DeviceActivity& a, uint64_t now) const;

  const CollectorOptions options_;
  mutable std::mutex mu_;
  uint64_t begin_ = 0;
  bool begun_ = false;
  uint64_t round_ = 0;
  bool held_ = false;
  std::unordered_map<uint32_t, Link> links_;  // correlation -> external id
  bool reattached_ = false;  // forget_correlations() was called: CUPTI came back (sampled timing)
  uint32_t first_link_ = 0;  // the lowest correlation id linked since (0: none yet)
  struct Waiting {
    uint64_t round;
    std::vector<DeviceActivity> activities;
  };
  std::unordered_map<uint32_t, Waiting> waiting_;      // activities that came before their link
  std::unordered_map<uint64_t, PendingCall> pending_;  // external id -> call so far
  std::unordered_map<uint64_t, uint64_t> incomplete_;  // calls left out (unfinished record or
                                                       // cut) -> the round; kept 8 rounds
  std::unordered_map<uint64_t, uint64_t> credited_;    // credited() calls not final yet -> the round
  RunningCalls running_ = nullptr;
  LostCredit lost_ = nullptr;
  void* lost_user_ = nullptr;
  std::map<uint32_t, SignatureTime> sigs_;
  std::map<std::string, std::string> demangled_;
  Health health_;
  Timeline timeline_;
};

// Nanoseconds during which at least one of the [start, end) intervals is running: the device time of
// work spread over several streams, overlaps counted once.
uint64_t busy_ns(std::vector<std::pair<uint64_t, uint64_t>> intervals);

// gettid() of the calling thread (cached per thread): how the timeline and the checks name threads.
uint32_t this_thread_id();

// A kernel name as people read it (abi::__cxa_demangle); the input when it is not a mangled name.
std::string demangle(const std::string& name);

}  // namespace bb::devtime
