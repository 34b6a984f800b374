// A bbreplay worker: told each case by its parent, runs it (runner.h) and answers with the result.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <c10/core/CPUAllocator.h>

#include <chrono>
#include <iostream>
#include <sstream>

#include "replay/bbreplay_app.h"
#include "replay/case_json.h"
#include "replay/cupti_call_timer.h"
#include "replay/memory.h"
#include "replay/poison.h"
#include "replay/process_state.h"
#include "replay/spent.h"
#include "replay/worker_pool.h"

namespace bb::replay::app {

namespace {

// In a worker: limits what the process may allocate (--worker-memory, resolved by the parent) and
// returns what one case may take (--max-case-bytes; 0: no limit). By default an eighth
// (kCaseCopies) of the memory free to the worker: the least of its limit, the machine's available
// memory and, on CUDA, the device's free memory.
uint64_t worker_memory_limits(const Options& o, const c10::Device& device) {
  const uint64_t limit = o.worker_memory.value_or(0);
  if (limit) {
    if (std::string why = limit_process_memory(limit); !why.empty())
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
// more than `budget`, skipped with that reason; nullopt for one that may run.
std::optional<CaseResult> beyond_budget(const trace::TraceEntry& entry, const std::string& variant, uint64_t budget) {
  if (budget == 0) return std::nullopt;
  std::optional<uint64_t> bytes;
  try {
    bytes = case_bytes(bind_call(entry), variant);
  } catch (const std::invalid_argument&) {  // (run_case says why the call cannot be bound)
    return std::nullopt;
  }
  if (!bytes || *bytes <= budget) return std::nullopt;
  return describe(entry, variant, Status::Skipped,
                  "its inputs and results take " + format_bytes(*bytes) + ", more than the memory budget of a case (" +
                      format_bytes(budget) + "; --max-case-bytes)");
}

}  // namespace

int worker_main(const Options& o) {
  ::signal(SIGINT, SIG_IGN);           // bbreplay stops its workers itself
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and a worker does not outlive a bbreplay that was killed
  // Results go to a copy of stdout on a high descriptor, each line after the token that the parent
  // sent first (worker_pool.h); anything a kernel prints goes to stderr, anything it writes to the
  // descriptors it finds is ignored by the parent.
  std::string token;
  if (!std::getline(std::cin, token) || token.empty()) return 2;
  int proto = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 512);
  if (proto < 0) proto = ::dup(STDOUT_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  report_phases_to(proto, note_prefix(token));  // a crash or hang is charged to native or to the kernel
  const std::string ready = note_prefix(token) + "ready\n";
  ProcessState pristine = process_state();
  Setup s = set_up(o, true);
  install_poisoning_allocator();
  // What loading the backend's libraries changed (their initializers ran) is set back, unflagged (no
  // case to charge it to); the poisoning allocator is bbreplay's own. Then every case is compared.
  pristine.cpu_allocator = c10::GetCPUAllocator();
  (void)restore_process_state(pristine);
  keep_process_baseline();
  s.run.policy = s.policy ? &*s.policy : nullptr;
  const uint64_t case_budget = worker_memory_limits(o, s.run.device);
  if (::write(proto, ready.data(), ready.size()) != static_cast<ssize_t>(ready.size())) return 1;
  std::string line;
  while (std::getline(std::cin, line)) {  // "<entry index> <variant>"
    Case c;
    std::istringstream in(line);
    if (!(in >> c.entry >> c.variant) || c.entry >= s.trace.ops.size()) return 2;
    const auto& entry = s.trace.ops[c.entry];
    const auto* kernel = s.has_backend ? s.kernel_for(entry.op) : nullptr;
    CaseResult result;
    Spent::take();
    const auto start = std::chrono::steady_clock::now();
    try {
      if (auto too_large = beyond_budget(entry, c.variant, case_budget)) result = std::move(*too_large);
      else
        result = run_case(entry, c.variant, kernel, s.run);
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
