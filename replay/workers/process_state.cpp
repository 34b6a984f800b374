#include "replay/workers/process_state.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <sys/resource.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <cerrno>
#include <cstring>
#include <cstdint>
#include <optional>
#include <sstream>

#include "replay/timing/cuda_red_zones.h"

namespace bb::replay {
namespace {

constexpr unsigned kFlushBits = 0x8040;  // MXCSR: FTZ (bit 15) and DAZ (bit 6)
// (SEGV, BUS, ILL: a handler there can compute results when they are first read. Not SYS: Triton's compiler
// installs one on its first use, H200 2026-12-04; a seccomp filter that traps the clock shows in the
// kernel worker's syscall watch instead, tamper.h)
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGILL};

bool same_handler(const struct sigaction& a, const struct sigaction& b) {
  return reinterpret_cast<void*>(a.sa_handler) == reinterpret_cast<void*>(b.sa_handler) &&
         (a.sa_flags & SA_SIGINFO) == (b.sa_flags & SA_SIGINFO);
}

// ATen's global switches that change which kernels native runs (and how fast): read and set back alike.
struct Switch {
  const char* name;
  bool ProcessState::*field;
  bool (*get)();
  void (*set)(bool);
};
const Switch kSwitches[] = {
    {"deterministic algorithms", &ProcessState::deterministic_algorithms,
     [] { return at::globalContext().deterministicAlgorithms(); },
     [](bool b) {
       auto& ctx = at::globalContext();
       ctx.setDeterministicAlgorithms(b, ctx.deterministicAlgorithmsWarnOnly());
     }},
    {"cuDNN enabled", &ProcessState::cudnn_enabled, [] { return at::globalContext().userEnabledCuDNN(); },
     [](bool b) { at::globalContext().setUserEnabledCuDNN(b); }},
    {"cuDNN benchmark", &ProcessState::cudnn_benchmark, [] { return at::globalContext().benchmarkCuDNN(); },
     [](bool b) { at::globalContext().setBenchmarkCuDNN(b); }},
    {"cuDNN deterministic", &ProcessState::cudnn_deterministic, [] { return at::globalContext().deterministicCuDNN(); },
     [](bool b) { at::globalContext().setDeterministicCuDNN(b); }},
    {"oneDNN enabled", &ProcessState::mkldnn_enabled, [] { return at::globalContext().userEnabledMkldnn(); },
     [](bool b) { at::globalContext().setUserEnabledMkldnn(b); }},
};

unsigned fp_control() {
#if defined(__x86_64__)
  return _mm_getcsr() & kFlushBits;
#else
  return 0;
#endif
}

}  // namespace

ProcessState process_state() {
  ProcessState s;
  s.cpu_allocator = c10::GetCPUAllocator();
  s.cuda_allocator = cuda_allocator();
  s.threads = at::get_num_threads();
  s.interop_threads = at::get_num_interop_threads();
  s.fp_control = fp_control();
  CPU_ZERO(&s.affinity);
  s.affinity_known = sched_getaffinity(0, sizeof(s.affinity), &s.affinity) == 0;
  errno = 0;
  s.priority = getpriority(PRIO_PROCESS, 0);
  s.record_function_callbacks = at::hasCallbacks();
  for (const Switch& sw : kSwitches) s.*sw.field = sw.get();
  for (size_t k = 0; k < s.fault_handlers.size(); ++k) sigaction(kFaultSignals[k], nullptr, &s.fault_handlers[k]);
  return s;
}

std::string restore_process_state(const ProcessState& before) {
  const ProcessState now = process_state();
  std::ostringstream what;
  auto changed = [&](const char* name, auto was, auto is) {
    what << (what.tellp() > 0 ? ", " : "") << name << " (" << was << " -> " << is << ")";
  };
  if (now.cpu_allocator != before.cpu_allocator) {
    what << (what.tellp() > 0 ? ", " : "") << "the CPU allocator";
    c10::SetCPUAllocator(before.cpu_allocator, /*priority=*/UINT8_MAX);
  }
  if (now.cuda_allocator != before.cuda_allocator) {
    what << (what.tellp() > 0 ? ", " : "") << "the CUDA allocator";
    set_cuda_allocator(before.cuda_allocator);
  }
  if (now.threads != before.threads) {
    changed("intra-op threads", before.threads, now.threads);
    at::set_num_threads(before.threads);
  }
  if (now.interop_threads != before.interop_threads)  // (cannot be set again once work ran)
    changed("inter-op threads", before.interop_threads, now.interop_threads);
  if (now.fp_control != before.fp_control) {
    changed("flush-to-zero/denormals-are-zero (MXCSR bits)", before.fp_control, now.fp_control);
#if defined(__x86_64__)
    _mm_setcsr((_mm_getcsr() & ~kFlushBits) | before.fp_control);
#endif
  }
  if (before.affinity_known && now.affinity_known && !CPU_EQUAL(&before.affinity, &now.affinity)) {
    changed("CPU affinity (CPUs)", CPU_COUNT(&before.affinity), CPU_COUNT(&now.affinity));
    sched_setaffinity(0, sizeof(before.affinity), &before.affinity);
  }
  if (now.priority != before.priority) {  // (a lower nice value may not be allowed back)
    changed("scheduling priority (nice)", before.priority, now.priority);
    setpriority(PRIO_PROCESS, 0, before.priority);
  }
  if (now.record_function_callbacks && !before.record_function_callbacks) {
    what << (what.tellp() > 0 ? ", " : "")
         << "RecordFunction callbacks (one outlives the kernel's call: it sees native's calls and the inputs' copies)";
    at::clearCallbacks();  // (there were none before)
  }
  for (size_t k = 0; k < now.fault_handlers.size(); ++k)
    if (!same_handler(now.fault_handlers[k], before.fault_handlers[k])) {
      what << (what.tellp() > 0 ? ", " : "") << "the handler of " << sigabbrev_np(kFaultSignals[k]);
      sigaction(kFaultSignals[k], &before.fault_handlers[k], nullptr);
    }
  for (const Switch& sw : kSwitches)
    if (now.*sw.field != before.*sw.field) {
      changed(sw.name, before.*sw.field, now.*sw.field);
      sw.set(before.*sw.field);
    }
  return what.str();
}

namespace {
std::optional<ProcessState> g_baseline;
}  // namespace

void keep_process_baseline() { g_baseline = process_state(); }

std::string restore_process_baseline() { return g_baseline ? restore_process_state(*g_baseline) : ""; }

}  // namespace bb::replay
