// A reference worker: told each case by bbreplay, runs it (runner.h) with native here and the kernel in
// its own process (remote_kernel.h), and answers with the result. It never loads the backend's code.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <sstream>

#include "replay/cli/bbreplay_app.h"
#include "replay/report/case_json.h"
#include "replay/timing/cupti_call_timer.h"
#include "replay/workers/isolation.h"
#include "replay/workers/memory.h"
#include "replay/case/case_steps.h"
#include "replay/case/poison.h"
#include "replay/workers/process_state.h"
#include "replay/workers/remote_kernel.h"
#include "replay/case/spent.h"
#include "replay/workers/worker_pool.h"

namespace bb::replay::app {

namespace {

// In a reference worker: limits what it may allocate (half of --worker-memory, resolved by bbreplay: the
// kernel's process has the other half) and returns what one case may take (--max-case-bytes; 0: no limit).
// By default an eighth (kCaseCopies) of the memory free to the slot: the least of its limit, the machine's
// available memory and, on CUDA, the device's free memory.
uint64_t worker_memory_limits(const Options& o, const c10::Device& device) {
  const uint64_t limit = o.worker_memory.value_or(0);
  if (limit) {
    if (std::string why = limit_process_memory(limit / 2); !why.empty())
      std::cerr << "bbreplay: worker memory is not limited: " << why << "\n";
  }
  if (o.max_case_bytes) return *o.max_case_bytes;
  uint64_t free = available_host_bytes();
  if (limit && (free == 0 || limit < free)) free = limit;
  if (device.is_cuda())
    if (const uint64_t on_device = cuda_free_bytes(); on_device && (free == 0 || on_device < free)) free = on_device;
  return free / kCaseCopies;
}

// A case whose values (inputs and results, known from meta tensors before anything is allocated) take
// more than `budget`, skipped with that reason; nullopt for one that may run. `bytes` gets the estimate.
std::optional<CaseResult> beyond_budget(const trace::TraceEntry& entry, const std::string& variant, uint64_t budget,
                                        uint64_t* bytes) {
  std::optional<uint64_t> known;
  try {
    known = case_bytes(bind_call(entry), variant);
  } catch (const std::invalid_argument&) {  // (run_case says why the call cannot be bound)
    return std::nullopt;
  }
  *bytes = known.value_or(0);
  if (budget == 0 || !known || *known <= budget) return std::nullopt;
  return describe(entry, variant, Status::Skipped,
                  "its inputs and results take " + format_bytes(*known) + ", more than the memory budget of a case (" +
                      format_bytes(budget) + "; --max-case-bytes)");
}

// A case that ended because the device ran out of memory (torch's message, from either process: the
// kernel's reaches here as text), whoever allocated last: the two processes share the device.
bool out_of_memory(const CaseResult& r) {
  return (r.status == Status::Failed || r.status == Status::Invalid || r.status == Status::Crashed) &&
         r.message.find("out of memory") != std::string::npos;
}

// A case that passed its checks and has no times because the device ran out of memory while timing it.
bool untimed_for_memory(const CaseResult& r) {
  return r.status == Status::Passed && r.message.rfind(kNotTimedOutOfMemory, 0) == 0;
}

// The kernel's process died during the self-check, where native ran in it: native's crash, not a kernel's
// (a traced call the harness built wrongly; a variant native's kernels do not take).
CaseResult native_crash(CaseResult r) {
  if (r.variant != "traced") {
    r.status = Status::Skipped;
    r.message = "variant " + r.variant + " does not apply to this call (native crashed: " + r.message + ")";
  } else {
    r.status = Status::Invalid;
    r.message = "native crashed on this call (" + r.message + "): a harness defect";
  }
  return r;
}

struct Reference {
  const Options& o;
  Setup s;
  KernelSpec spec;
  std::unique_ptr<KernelProcess> kernel;
  std::string started;  // why the kernel's process could not be started ("" when it was)

  KernelProcess* kernel_process() {
    if (kernel && kernel->alive()) return kernel.get();
    kernel.reset();
    try {
      kernel = std::make_unique<KernelProcess>(spec);
      started.clear();
    } catch (const std::exception& e) {
      started = e.what();
    }
    return kernel.get();
  }

  // What the case held on the device, given back where it was large (both processes), as after a case
  // that ran out of device memory (`bytes`: UINT64_MAX).
  void release_memory(uint64_t bytes) {
    if (s.run.device.is_cpu()) return;
    Spent spent(phase::kMemory);
    if (kernel && kernel->alive()) try {
        kernel->release_memory(bytes);
      } catch (const KernelGone&) {  // (ended: the next case starts another)
      }
    if (bytes >= kLargeCase) release_device_cache(s.run.device);
  }

  CaseResult run(const trace::TraceEntry& entry, const std::string& variant) {
    KernelProcess* k = kernel_process();
    if (!k) return describe(entry, variant, Status::Skipped, "bbreplay could not start the kernel's process: " + started);
    CaseResult r = run_case(entry, variant, *k, !s.has_backend || o.native_only, s.run);
    const bool self_check = !s.has_backend || o.native_only;
    if (self_check && r.status == Status::Crashed) r = native_crash(r);
    return r;
  }
};

// What the worker's "ready" note says of its kernel worker: the backend's load problems and the isolation.
std::string ready_note(const Reference& ref) {
  nlohmann::json j = {{"isolation", ref.kernel ? ref.kernel->isolation() : ""}, {"started", ref.started}};
  if (ref.kernel) j["problems"] = ref.kernel->load().problems;
  return "ready " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

int worker_main(const Options& o) {
  ::signal(SIGINT, SIG_IGN);           // bbreplay stops its workers itself
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and a worker does not outlive a bbreplay that was killed
  ::prctl(PR_SET_DUMPABLE, 0);         // (no other process of this user may read or write its memory)
  become_subreaper();                  // (what a kernel's process detaches is reparented here)
  warn_each_once();
  // Results go to a copy of stdout on a high descriptor, each line after the token that bbreplay sent
  // first (worker_pool.h), with the run's secret seed; anything written to stdout goes to stderr.
  std::string first;
  if (!std::getline(std::cin, first) || first.empty()) return 2;
  std::istringstream words(first);
  std::string token;
  uint64_t secret = 0;
  if (!(words >> token >> secret)) return 2;
  int proto = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 512);
  if (proto < 0) proto = ::dup(STDOUT_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  report_phases_to(proto, note_prefix(token));  // a crash or hang is charged to native or to the kernel
  ProcessState pristine = process_state();
  Reference ref{o, set_up(o, true), {}, nullptr, ""};
  ref.s.run.seed = secret;
  install_poisoning_allocator();
  pristine.cpu_allocator = c10::GetCPUAllocator();
  (void)restore_process_state(pristine);
  keep_process_baseline();
  ref.s.run.policy = ref.s.policy ? &*ref.s.policy : nullptr;
  const uint64_t case_budget = worker_memory_limits(o, ref.s.run.device);
  ref.spec.argv = kernel_worker_argv(ref.s.python_kernels && !o.native_only);
  ref.spec.backend = o.native_only ? "" : ref.s.backend.dir;
  ref.spec.built = ref.s.backend.built;
  ref.spec.policy_text = ref.s.policy_text;
  ref.spec.policy_name = o.policy;
  ref.spec.device = ref.s.run.device;
  ref.spec.memory = o.worker_memory.value_or(0) / 2;
  ref.spec.isolation = o.isolation;
  (void)ref.kernel_process();
  const std::string ready = note_prefix(token) + ready_note(ref) + "\n";
  if (::write(proto, ready.data(), ready.size()) != static_cast<ssize_t>(ready.size())) return 1;
  std::string line;
  while (std::getline(std::cin, line)) {  // "<entry index> <variant>"
    Case c;
    std::istringstream in(line);
    if (!(in >> c.entry >> c.variant) || c.entry >= ref.s.trace.ops.size()) return 2;
    const auto& entry = ref.s.trace.ops[c.entry];
    CaseResult result;
    Spent::take();
    forget_phase();
    const auto start = std::chrono::steady_clock::now();
    try {
      uint64_t bytes = 0;
      if (auto too_large = beyond_budget(entry, c.variant, case_budget, &bytes)) {
        result = std::move(*too_large);
      } else {
        // (a kernel's process may describe any size; the estimate is no bound where no meta kernel made
        // the results, as for embedding_dense_backward's weight-sized gradient: a case's budget is)
        const uint64_t budget_reads = case_budget ? case_budget : kDefaultReadLimit;
        if (KernelProcess* k = ref.kernel_process())
          k->limit_reads(std::max(16 * bytes + (uint64_t{256} << 20), budget_reads));
        Spent unnamed(phase::kUnnamed);
        result = ref.run(entry, c.variant);
        // Out of device memory: what both processes cached given back, then once more. A case that had
        // passed its checks and ran out while timed keeps that verdict, untimed, unless the second run
        // ends otherwise; any other case out of memory twice is not judged (no kernel is accused, or
        // credited, for the memory the judge holds beside it).
        if (out_of_memory(result) || untimed_for_memory(result)) {
          ref.release_memory(UINT64_MAX);
          CaseResult again = ref.run(entry, c.variant);
          if (!untimed_for_memory(result) || !out_of_memory(again)) result = std::move(again);
          if (out_of_memory(result))
            result = describe(entry, c.variant, Status::Skipped,
                              "not judged: the device ran out of memory twice while judging it, with what both "
                              "processes had cached given back in between (its values take " +
                                  (bytes ? format_bytes(bytes) : std::string("a size not known beforehand")) +
                                  "; a case's budget is " + format_bytes(case_budget) +
                                  ", --max-case-bytes): " + result.message);
        }
        ref.release_memory(bytes);
      }
    } catch (const std::exception& e) {  // the harness's own failure: said, not hidden
      result =
          describe(entry, c.variant, Status::Skipped, std::string("bbreplay could not run this case: ") + e.what());
    }
    result.worker_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.spent = Spent::take();
    std::string out = reply_prefix(token) + case_to_json_line(result);
    if (::write(proto, out.data(), out.size()) != static_cast<ssize_t>(out.size())) return 1;
  }
  return 0;
}

}  // namespace bb::replay::app
