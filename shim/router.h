// Routing ops to a generated backend inside the program: a boxed kernel at the BackendSelect key of
// each routed op decides per call (policy condition, mode) between the generated kernel and the
// native one (redispatch below BackendSelect), counts what happened, and falls back on faults.
#pragma once

#include <string>

#include "backends/loader.h"
#include "policy/policy.h"

namespace bb::shim {

// Registers a route for every kernel of `backend` that the policy allows: with an implied policy
// (source == "") every kernel, else only the ops it names. Reports policy ops the backend lacks.
// Returns how many ops are routed. Once per process. `named_by_policy`: the backend folder came from
// the policy file's `backend:` key (the summary says so: a policy file then brings code, not only data).
int start_routing(backends::Backend backend, policy::Policy policy, bool named_by_policy = false);

// Per-op table of calls, routed, declined, fallbacks and shadow mismatches; "" when nothing routes.
std::string routing_summary();

}  // namespace bb::shim
