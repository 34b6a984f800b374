// The floor of any tracer built on RecordFunction, in a real program: loaded into a process that has
// imported torch (scripts/bench_overhead.py's rf-floor configuration loads it with ctypes), it adds one
// global callback that asks for every op's inputs and does nothing with them. What that costs a step
// is what PyTorch charges for observing ops with their arguments (RecordFunction and boxing); what
// bbshim's tracing costs beyond it is bbshim's own. With BB_RF_FLOOR_INPUTS=0 the callback does not
// ask for inputs (rf-names): what observing every op by name alone costs, without boxing arguments.
#include <ATen/record_function.h>

#include <cstdlib>
#include <cstring>

namespace {

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) { return nullptr; }
void on_end(const at::RecordFunction&, at::ObserverContext*) {}

struct Register {
  Register() {
    const char* inputs = std::getenv("BB_RF_FLOOR_INPUTS");
    const bool needs_inputs = !(inputs && std::strcmp(inputs, "0") == 0);
    at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end).needsInputs(needs_inputs).scopes({at::RecordScope::FUNCTION}));
  }
} registered;

}  // namespace
