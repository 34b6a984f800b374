// The floor of any tracer built on RecordFunction, in a real program: loaded into a process that has
// imported torch (scripts/bench_overhead.py's rf-floor configuration loads it with ctypes), it adds one
// global callback that asks for every op's inputs and does nothing with them. What that costs a step
// is what PyTorch charges for observing ops with their arguments (RecordFunction and boxing); what
// bbshim's tracing costs beyond it is bbshim's own.
#include <ATen/record_function.h>

namespace {

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) { return nullptr; }
void on_end(const at::RecordFunction&, at::ObserverContext*) {}

struct Register {
  Register() {
    at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  }
} registered;

}  // namespace
