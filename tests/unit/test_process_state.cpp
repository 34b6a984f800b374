// bbreplay's process-state check (replay/workers/process_state): a change is described and set back.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstring>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "catch.h"
#include "replay/workers/process_state.h"

TEST_CASE("process-wide state a kernel changed is named and set back") {
  const bb::replay::ProcessState before = bb::replay::process_state();
  CHECK(bb::replay::restore_process_state(before).empty());  // nothing changed
  at::set_num_threads(before.threads + 1);
  at::globalContext().setBenchmarkCuDNN(!before.cudnn_benchmark);
  at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction&) { return std::unique_ptr<at::ObserverContext>(); }));
  REQUIRE_FALSE(before.record_function_callbacks);  // (a test process registers none of its own)
  const std::string what = bb::replay::restore_process_state(before);
  CHECK(what.find("intra-op threads") != std::string::npos);
  CHECK(what.find("cuDNN benchmark") != std::string::npos);
  CHECK(what.find("RecordFunction callbacks") != std::string::npos);
  CHECK(what.find("CPU allocator") == std::string::npos);  // only what changed
  CHECK(at::get_num_threads() == before.threads);
  CHECK(at::globalContext().benchmarkCuDNN() == before.cudnn_benchmark);
  CHECK_FALSE(at::hasCallbacks());
  CHECK(bb::replay::restore_process_state(before).empty());  // all set back
}

namespace {

// Each item of the process state, changed alone: named, and set back (or said where it cannot be).
struct Change {
  const char* name;     // what the description must say
  void (*change)();     // makes the change
  bool set_back = true; // restore_process_state undoes it
};

void on_fault(int) {}

const Change kChanges[] = {
    {"the CPU allocator",
     [] {
       static struct : c10::Allocator {
         c10::DataPtr allocate(size_t n) override { return c10::GetDefaultCPUAllocator()->allocate(n); }
         c10::DeleterFnPtr raw_deleter() const override { return c10::GetDefaultCPUAllocator()->raw_deleter(); }
         void copy_data(void* d, const void* s, size_t n) const override { std::memcpy(d, s, n); }
       } other;
       c10::SetCPUAllocator(&other, 255);
     }},
    {"intra-op threads", [] { at::set_num_threads(at::get_num_threads() + 1); }},
#if defined(__x86_64__)
    {"flush-to-zero", [] { _mm_setcsr(_mm_getcsr() | 0x8040); }},
#endif
    {"CPU affinity",  // (on a machine of one CPU there is nothing to narrow: that section is skipped)
     [] {
       cpu_set_t one;
       CPU_ZERO(&one);
       CPU_SET(sched_getcpu(), &one);
       sched_setaffinity(0, sizeof one, &one);
     }},
    // (a lower nice value may not be allowed back without CAP_SYS_NICE)
    {"scheduling priority", [] { setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0) + 1); }, false},
    {"RecordFunction callbacks",
     [] {
       at::addGlobalCallback(at::RecordFunctionCallback(
           [](const at::RecordFunction&) { return std::unique_ptr<at::ObserverContext>(); }));
     }},
    {"deterministic algorithms", [] { at::globalContext().setDeterministicAlgorithms(true, false); }},
    {"cuDNN enabled", [] { at::globalContext().setUserEnabledCuDNN(!at::globalContext().userEnabledCuDNN()); }},
    {"cuDNN benchmark", [] { at::globalContext().setBenchmarkCuDNN(!at::globalContext().benchmarkCuDNN()); }},
    {"cuDNN deterministic",
     [] { at::globalContext().setDeterministicCuDNN(!at::globalContext().deterministicCuDNN()); }},
    {"oneDNN enabled", [] { at::globalContext().setUserEnabledMkldnn(!at::globalContext().userEnabledMkldnn()); }},
    {"the handler of SEGV", [] { ::signal(SIGSEGV, on_fault); }},
    {"the handler of BUS", [] { ::signal(SIGBUS, on_fault); }},
    {"the handler of ILL", [] { ::signal(SIGILL, on_fault); }},
};

}  // namespace

TEST_CASE("every item of the process state is named when it changes, and set back") {
  const bb::replay::ProcessState before = bb::replay::process_state();
  REQUIRE(bb::replay::restore_process_state(before).empty());
  for (const Change& c : kChanges) {
    SECTION(c.name) {
      if (std::string(c.name) == "CPU affinity" && CPU_COUNT(&before.affinity) < 2) continue;
      c.change();
      const std::string what = bb::replay::restore_process_state(before);
      CHECK(what.find(c.name) != std::string::npos);
      if (c.set_back) CHECK(bb::replay::restore_process_state(before).empty());
    }
  }
}
