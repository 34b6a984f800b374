// Where a bbreplay worker's time goes, by phase: the report carries it per case and
// scripts/replay_throughput.py sums it per trace. A Spent scope charges its wall time to its phase,
// less the time of scopes opened inside it (each second is charged once, to the innermost phase); a
// sealed scope keeps everything inside it, nested scopes included, for its own phase.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace bb::replay {

namespace phase {
inline constexpr const char* kInputs = "inputs";                    // building input sets and copies of them
inline constexpr const char* kNative = "native runs";               // native's untimed calls
inline constexpr const char* kKernel = "kernel runs";               // the kernel's untimed calls
inline constexpr const char* kTimed = "timed runs";                 // inside the clock (host) or CUPTI window (CUDA)
inline constexpr const char* kEvict = "eviction and sync";          // cache eviction, synchronization
inline constexpr const char* kCompare = "comparison";               // results against native's, tolerances
inline constexpr const char* kReference = "float64 reference";      // float64 and lower-precision references
inline constexpr const char* kIntegrity = "integrity";              // poisoning, input-mutation and output checks
inline constexpr const char* kTransfer = "transfer";                // values to and from the kernel's process
inline constexpr const char* kCupti = "CUPTI records";              // CUDA: CUPTI's records handed over and read
inline constexpr const char* kMemory = "device memory given back";  // after a large case: caches emptied (both sides)
// Python kernels' first calls: their files imported, and Triton compiling (the kernel's process)
inline constexpr const char* kLoad = "kernel import and compile";
inline constexpr const char* kAll[] = {kInputs,    kNative,    kKernel,   kTimed, kEvict,  kCompare,
                                       kReference, kIntegrity, kTransfer, kCupti, kMemory, kLoad};
// Not a phase: a scope of this charges nothing (its time stays the report's "other in the worker"), but the
// profile by place names its line, so that what no phase names can be found (e.g. a step's own code).
inline constexpr const char* kUnnamed = "(no phase)";
}  // namespace phase

class Spent {
 public:
  // (`file`, `line`: where the scope is, for the profile below; the defaults name the caller's line)
  explicit Spent(const char* phase, bool sealed = false, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE());
  ~Spent();
  Spent(const Spent&) = delete;
  Spent& operator=(const Spent&) = delete;

  // Seconds charged to each phase on this thread since the last take(), in order of first charge;
  // clears them.
  static std::vector<std::pair<std::string, double>> take();

  // `seconds` of the innermost scope's own time that were `phase`'s (measured inside it by a callee that
  // cannot open scopes of its own): charged to `phase`, and taken off that scope's.
  static void charge_within(const char* phase, double seconds, const char* file = __builtin_FILE(),
                            int line = __builtin_LINE());

  // Seconds another process spent on this one's behalf while this thread waited for it, by phase (that
  // process's take()): charged to their phases here, and taken off the innermost scope's own. Only the
  // phases above count, and at most `waited` seconds in all (the other process is the kernel's: its
  // figures may be anything, and only say where time went).
  static void charge_remote(const std::vector<std::pair<std::string, double>>& spent, double waited);

  // A profile by place, for finding where a phase's time goes: with BB_REPLAY_PROFILE=PREFIX set, every
  // process of a replay keeps, per scope's source line, how often it ran and its own seconds (and per
  // `note`d place, e.g. each device synchronization, its count and seconds), and rewrites
  // PREFIX.<pid>-<start>.tsv with them whenever a case's figures are taken and at exit. Off (nothing kept) when
  // unset.
  // A noted place: `since` is note_start()'s, taken before it (0, and nothing noted, when not profiling).
  static double note_start();
  static void note(const char* what, double since, const char* file = __builtin_FILE(), int line = __builtin_LINE());
  static void write_profile();
  // The folder PREFIX names ("" when not profiling, or when PREFIX has none): the kernel's process writes there.
  static std::string profile_folder();

 private:
  const char* phase_ = nullptr;  // null: opened inside a sealed scope, charges nothing
  bool sealed_ = false;
  double start_ = 0, nested_ = 0;
  Spent* outer_ = nullptr;
  const char* file_ = nullptr;
  int line_ = 0;
};

}  // namespace bb::replay
