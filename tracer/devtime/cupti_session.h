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

#include "tracer/devtime/collector.h"

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
};

// Sampled timing: device time is recorded in windows of on_ms at the start of every period_ms; calls
// that start and end inside one window are timed, calls cut by a window's edge are left out (and
// counted), the rest cost no more than tracing op shapes. Off (period_ms == 0): every call is timed.
struct Sampling {
  uint32_t on_ms = 0, period_ms = 0;
  bool enabled() const { return period_ms > 0; }
  std::string describe() const;  // "10 ms of every 100 ms", or "" when off
};

class CuptiSession {
 public:
  using Warn = std::function<void(const std::string&)>;
  CuptiSession(std::unique_ptr<CuptiApi> api, CollectorOptions options, Warn warn, Sampling sampling = {});

  // Starts collecting unless `conflict` says why not (a profiler already holds CUPTI). Returns true
  // when collecting. Says once, through `warn`, why not.
  bool start(const std::string& conflict);
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Around each op call, on its thread. op_start returns true when it pushed an id; then op_end
  // must follow on the same thread (it pops even after timing stopped, to keep CUPTI's stack whole).
  bool op_start(uint32_t sig);
  void op_end();

  // Another CUPTI client is about to replace our buffer callbacks or timestamps, or finalize CUPTI
  // (seen by the preload's interposers): collect what is ours now, then stop for good.
  void taken_over(const std::string& what);
  void round();  // periodic: completed buffers, one round
  // Sampled timing, from the sampler thread: opens (records again) or closes the window. The first
  // window opens with start(). Where CUPTI can be detached, closing then waits until drain_until
  // at most for the records of the window's launches (the device may run behind the host), collects
  // them and detaches CUPTI; opening attaches it again. Returns false once timing has stopped: the
  // thread may end.
  bool window(bool open, std::chrono::steady_clock::time_point drain_until = {});
  const Sampling& sampling() const { return sampling_; }
  uint64_t windows() const { return windows_.load(); }    // opened so far (the first included)
  uint64_t detaches() const { return detaches_.load(); }  // gaps between windows with CUPTI detached
  void finish();  // at exit, before CUDA tears down: forced flush, final round; CUPTI untouched after
  void forget();  // in a forked child: never call CUPTI again

  // "on", "off: why" or "stopped: why".
  std::string status() const;
  bool uses_callbacks() const { return api_ && api_->uses_callbacks(); }
  const Collector& collector() const { return collector_; }
  Collector& collector() { return collector_; }

 private:
  void stop_locked(const std::string& why);  // control_ held: collect what is ours, stop for good, say so
  std::unique_ptr<CuptiApi> api_;
  Collector collector_;
  const bool timeline_;
  Warn warn_;
  const Sampling sampling_;
  // Odd while a window is open (always, when not sampling): a call that sees it change was cut.
  std::atomic<uint64_t> epoch_{1};
  std::atomic<uint64_t> windows_{0};
  std::atomic<uint64_t> detaches_{0};
  uint32_t open_mark_ = 0;      // last_linked() as the window opened
  mutable std::mutex control_;  // start / round / finish / taken_over / window
  std::atomic<bool> active_{false};
  std::atomic<bool> forgotten_{false};
  std::atomic<uint64_t> serial_{0};
  std::atomic<bool> finished_{false};
  bool started_ = false;
  std::string off_;  // why timing never started
};

}  // namespace bb::devtime
