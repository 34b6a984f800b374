#include "policy/verify/native_watch.h"

#include <algorithm>

#include "backends/op_kinds.h"
#include "tracer/format/op_name.h"

namespace bb::verify {

namespace {
thread_local NativeCallWatch* t_watch = nullptr;
}  // namespace

// Lives as long as the allowed op's RecordFunction (the dispatcher keeps the start callback's context
// until the op returns): while any is alive, the ops called are the allowed op's own.
struct InsideAllowed final : at::ObserverContext {
  explicit InsideAllowed(NativeCallWatch* watch) : w(watch) { ++w->inside_allowed_; }
  ~InsideAllowed() override { --w->inside_allowed_; }
  NativeCallWatch* w;
};

std::unique_ptr<at::ObserverContext> note_native_call(const at::RecordFunction& fn) {
  NativeCallWatch* w = t_watch;
  if (!w || !w->first_.empty()) return nullptr;
  const char* name = fn.name();
  const char* overload = fn.overload_name();
  if (name == w->last_name_ && overload == w->last_overload_) return nullptr;  // (pointers into the schema)
  const std::string op = trace::join_op(name ? name : "", overload);
  if (w->inside_allowed_ > 0) {  // (only with an allowance)
    if (backends::does_work_of(w->kernel_op_, op)) w->first_ = op;
    return nullptr;
  }
  if (!backends::is_plumbing_for(w->kernel_op_, op)) {
    if (!w->allow_ || !backends::is_allowed_for(w->kernel_op_, op, *w->allow_)) {
      w->first_ = op;
      return nullptr;
    }
    if (w->allowed_.size() < NativeCallWatch::kMaxAllowed &&
        std::find(w->allowed_.begin(), w->allowed_.end(), op) == w->allowed_.end())
      w->allowed_.push_back(op);
    return std::make_unique<InsideAllowed>(w);
  }
  w->last_name_ = name;
  w->last_overload_ = overload;
  return nullptr;
}

NativeCallWatch::NativeCallWatch(const std::string& kernel_op, const backends::AtenAllowance* allow)
    : kernel_op_(kernel_op),
      allow_(allow && !allow->empty() ? allow : nullptr),
      outer_(t_watch),
      owns_callback_(t_watch == nullptr) {
  if (owns_callback_)
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&note_native_call).needsInputs(false).scopes({at::RecordScope::FUNCTION}));
  t_watch = this;
}

NativeCallWatch::~NativeCallWatch() {
  t_watch = outer_;
  if (owns_callback_) at::removeCallback(handle_);
}

}  // namespace bb::verify
