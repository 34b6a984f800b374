#include "policy/verify/native_watch.h"

#include "backends/op_kinds.h"
#include "tracer/format/op_name.h"

namespace bb::verify {

namespace {
thread_local NativeCallWatch* t_watch = nullptr;
}  // namespace

std::unique_ptr<at::ObserverContext> note_native_call(const at::RecordFunction& fn) {
  NativeCallWatch* w = t_watch;
  if (!w || !w->first_.empty()) return nullptr;
  const char* name = fn.name();
  const char* overload = fn.overload_name();
  if (name == w->last_name_ && overload == w->last_overload_) return nullptr;  // (pointers into the schema)
  const std::string op = trace::join_op(name ? name : "", overload);
  if (!backends::is_plumbing_for(w->kernel_op_, op)) {
    w->first_ = op;
    return nullptr;
  }
  w->last_name_ = name;
  w->last_overload_ = overload;
  return nullptr;
}

NativeCallWatch::NativeCallWatch(const std::string& kernel_op)
    : kernel_op_(kernel_op), outer_(t_watch), owns_callback_(t_watch == nullptr) {
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
