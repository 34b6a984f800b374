// The integrity flags (docs/integrity.md): what a kernel was caught doing. One enum and one name
// table for the preload's shadow mode, bbreplay's checks, its reports and their JSON. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bb::verify {

enum class Flag {        // (flags.cpp names them in this order; TimerTampering last)
  NativeCall,            // it handed its work to ATen or a vendor library
  CachedResult,          // a result that does not follow the inputs
  UnwrittenOutput,       // output memory it never wrote
  InputMutation,         // an input changed that the schema does not let the op write
  Aliasing,              // an output in an input's or another output's memory where native's is not
  PrecisionDowngrade,    // computed in a lower floating-point precision
  EscapingWork,          // work the caller does not wait for (CUDA streams; CPU: results written after the return)
  EnvironmentTampering,  // CUDA: changed limits, cache configuration, L2 persistence, ...
  ImpossibleSpeed,       // CUDA: faster than writing its results can be
  DispatcherOverride,    // registered a kernel over one of ATen's own (native would run it)
  TimerTampering,        // changed what the clock or the timer reads (bbreplay's code, CUPTI), or times disagree with a clock outside its process
};

// "native-call", "cached-result", ... (the names reports and docs use).
const char* flag_name(Flag f);
// The flag of a name; nullopt for a name that is none.
std::optional<Flag> flag_from_name(const std::string& name);
// Every flag, in the order of the enum.
const std::vector<Flag>& all_flags();
// The names of `flags`, in order; joined by `separator`.
std::vector<std::string> flag_names(const std::vector<Flag>& flags);
std::string flag_names(const std::vector<Flag>& flags, const std::string& separator);

}  // namespace bb::verify
