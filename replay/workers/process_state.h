// Process-wide state that native's runs depend on and that a kernel under test can change from inside
// its call: the CPU and CUDA allocators, intra- and inter-op thread counts, the calling thread's floating-point
// control (flush-to-zero), CPU affinity and scheduling priority, RecordFunction callbacks (a callback
// outliving the kernel's call sees native's calls and the harness's input copies), ATen's global
// backend switches (cuDNN, deterministic algorithms, oneDNN), and the handlers of fault signals. bbreplay's worker takes it once set up
// and compares it after every case: a change is `environment-tampering` (in the self-check too, where
// it would accuse native), and is undone where it can be (docs/integrity.md).
#pragma once

#include <sched.h>
#include <signal.h>

#include <array>
#include <string>

namespace c10 {
struct Allocator;
}

namespace bb::replay {

struct ProcessState {
  c10::Allocator* cpu_allocator = nullptr;
  void* cuda_allocator = nullptr;  // (replay/timing/cuda_red_zones.h; null without CUDA parts)
  int threads = 0, interop_threads = 0;
  unsigned fp_control = 0;  // x86: MXCSR's flush-to-zero and denormals-are-zero bits; 0 elsewhere
  cpu_set_t affinity{};
  bool affinity_known = false;
  int priority = 0;
  bool record_function_callbacks = false;
  bool deterministic_algorithms = false, cudnn_enabled = false, cudnn_benchmark = false, cudnn_deterministic = false,
       mkldnn_enabled = false;
  // Handlers of the signals a memory fault raises (SIGSEGV, SIGBUS, SIGILL): a kernel's handler can compute
  // results when they are first read (protected pages).
  std::array<struct sigaction, 3> fault_handlers{};
};

ProcessState process_state();

// What differs from `before`, described ("" when nothing does); what can be set back is set back.
std::string restore_process_state(const ProcessState& before);

// The worker's state once it is set up (its backend loaded), for run_case to compare each case with.
void keep_process_baseline();
// restore_process_state() against that baseline; "" when none was kept.
std::string restore_process_baseline();

}  // namespace bb::replay
