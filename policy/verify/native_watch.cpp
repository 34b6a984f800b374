#include "policy/verify/native_watch.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "backends/op_kinds.h"
#include "tracer/format/op_name.h"

namespace bb::verify {

namespace {
thread_local NativeCallWatch* t_watch = nullptr;

// backends::is_plumbing_for(kernel_op, the op named by `name` and `overload`), remembered per thread: a
// routed call's kernel calls the same few plumbing ops (empty, detach, contiguous, ...) call after call,
// and asking again builds strings and takes a lock for each (about 1 us of a Python kernel's call,
// 2026-12-06). The pointers (into the op's schema) only choose the slot; a hit is checked by content,
// so a name freed and its memory reused for another cannot be mistaken for it.
struct PlumbingSeen {
  const char* name_at = nullptr;
  const char* overload_at = nullptr;
  std::string name, overload, kernel_op;
  bool plumbing_for = false;
};
thread_local std::array<PlumbingSeen, 64> t_plumbing;

bool plumbing_for(const std::string& kernel_op, const char* name, const char* overload) {
  const auto at = [](const char* p) { return static_cast<size_t>(reinterpret_cast<uintptr_t>(p) >> 3); };
  PlumbingSeen& e = t_plumbing[(at(name) ^ (at(overload) * 31)) % std::tuple_size_v<decltype(t_plumbing)>];
  if (e.name_at == name && e.overload_at == overload && e.name == name && e.overload == overload &&
      e.kernel_op == kernel_op)
    return e.plumbing_for;
  e.plumbing_for = backends::is_plumbing_for(kernel_op, trace::join_op(name, overload));
  e.name_at = name, e.overload_at = overload;
  e.name = name, e.overload = overload, e.kernel_op = kernel_op;
  return e.plumbing_for;
}
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
  if (!name) name = "";
  if (!overload) overload = "";
  if (name == w->last_name_ && overload == w->last_overload_) return nullptr;  // (pointers into the schema)
  if (w->inside_allowed_ > 0) {  // (only with an allowance)
    const std::string op = trace::join_op(name, overload);
    if (backends::does_work_of(w->kernel_op_, op)) w->first_ = op;
    return nullptr;
  }
  if (!plumbing_for(w->kernel_op_, name, overload)) {
    const std::string op = trace::join_op(name, overload);
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
