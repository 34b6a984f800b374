#include "tracer/trace_sampling.h"

namespace bb::tracer {

std::string TraceSamplingOptions::describe() const {
  return "1 call in " + std::to_string(every) +
         ", at random, once the signatures seen are stable (counts of the calls seen so extrapolated)";
}

TraceSampler::TraceSampler(TraceSamplingOptions options, clock::time_point start) : options_(options), last_(start) {
  history_.push_back({start, 0, 0});
}

void TraceSampler::note(clock::time_point t, std::string what) {
  if (events_.size() >= kMaxEvents) return;
  events_.push_back({std::chrono::duration<double>(t.time_since_epoch()).count(), std::move(what)});
}

bool TraceSampler::step(clock::time_point now, uint64_t calls, uint64_t signatures, bool hold) {
  if (now < last_) now = last_;
  (sampling_ ? sampled_ : full_) += now - last_;
  last_ = now;
  if (!options_.enabled()) return false;

  // Over the last settle_ms (while sampling: of the sampled calls), how many signatures were new.
  history_.push_back({now, calls, signatures});
  const auto settle = std::chrono::milliseconds(options_.settle_ms);
  while (history_.size() > 1 && history_[1].t <= now - settle) history_.pop_front();
  const Mark& base = history_.front();
  const bool spanned = base.t <= now - settle;
  const uint64_t dc = calls - base.calls, ds = signatures - base.signatures;
  const bool few_new = static_cast<double>(ds) <= options_.new_share * static_cast<double>(dc);

  auto switch_to = [&](bool sample, std::string why) {
    sampling_ = sample;
    held_ = false;
    history_.clear();
    history_.push_back({now, calls, signatures});
    note(now, std::string(sample ? "sampled: " : "every call: ") + why);
  };
  if (sampling_) {
    if (hold) {
      switch_to(false, "device timing or routing needs every call");
      held_ = true;
    } else if (ds >= 2 && !few_new) {  // not stable any more: the program does something new
      switch_to(false, std::to_string(ds) + " new signatures in " + std::to_string(dc) + " sampled calls");
    }
  } else if (!hold && few_new && (held_ || (spanned && dc >= options_.min_calls))) {
    // Stable for settle_ms; or stable when a hold began, and still, every call traced, since.
    ++to_sampled_;
    switch_to(true, held_ ? "no longer held, " + std::to_string(ds) + " new signatures in " + std::to_string(dc) +
                                " calls meanwhile"
                          : std::to_string(ds) + " new signatures in the last " + std::to_string(dc) + " calls");
  }
  if (!hold && !sampling_) held_ = false;  // a hold ended without a return to sampling: settle again
  return sampling_;
}

trace::TracingInfo TraceSampler::report() const {
  trace::TracingInfo r;
  r.sampled = options_.describe();
  r.full_s = std::chrono::duration<double>(full_).count();
  r.sampled_s = std::chrono::duration<double>(sampled_).count();
  r.to_sampled = to_sampled_;
  r.scale = options_.every;
  r.events = events_;
  return r;
}

}  // namespace bb::tracer
