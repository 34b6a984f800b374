// Tolerances of a comparison: relative and absolute, per dtype (torch.testing's defaults when nothing
// says otherwise). The routing policy (policy/policy.h) overrides them per op.
#pragma once

#include <c10/core/ScalarType.h>

namespace bb::verify {

struct Tolerance {
  double rtol = 0, atol = 0;
};

// torch.testing.assert_close's tolerance for a dtype; 0, 0 (exact) for integers and bool.
Tolerance default_tolerance(c10::ScalarType t);

}  // namespace bb::verify
