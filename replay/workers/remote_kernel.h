// The kernel worker seen from its reference worker (replay/cli/kernel_worker.h): started isolated
// (replay/workers/isolation.h), given each call's arguments (their structure in the request, their bytes in an
// inbox it maps read-only, or on CUDA in a device buffer shared over CUDA IPC), asked to run the kernel,
// and read back: the results and the arguments after the call are copied out of the kernel's process
// into the reference's memory (process_vm_readv on the CPU, a CUDA IPC buffer on the GPU), with their
// memory overlaps as they were there ("replicas"), and judged here, where no code of the kernel's runs.
// On the CPU the result bytes are also read at random places the moment the call returns, and each
// host-timed run is watched from outside (this process's clock, the OS's account of the kernel
// thread's CPU time).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "policy/verify/clock_checks.h"
#include "policy/verify/cuda_checks.h"
#include "replay/case/case_steps.h"
#include "replay/timing/ipc_buffer.h"
#include "replay/workers/memory.h"
#include "replay/workers/wire.h"

namespace bb::replay {

// The kernel's process died, or answered what no bbreplay worker answers, during a request. Not a
// std::exception, so that no step takes it for the kernel raising: run_case makes it the case's result.
struct KernelGone {
  std::string why;
};

// Something found about the kernel's process: the flag's name and why.
struct RemoteFinding {
  std::string flag, why;
};

// How to start a kernel worker.
struct KernelSpec {
  std::vector<std::string> argv;  // the worker's command (bbreplay --worker-kernel, inside Python for Python kernels)
  std::string backend;            // "": native runs in it as "the kernel" (the self-check)
  std::map<std::string, std::string> built;  // the backend's C++/CUDA folders -> their libraries (built here)
  std::string policy_text, policy_name;
  c10::Device device = c10::kCPU;
  uint64_t memory = 0;             // its RLIMIT_DATA (0: none)
  std::string isolation = "auto";  // auto, namespaces, subreaper
};

// What the kernel's process said when it loaded its backend, and what was found then.
struct LoadReport {
  std::set<std::string> kernels;
  std::vector<std::string> problems;
  std::map<std::string, std::string> unusable;
  std::vector<RemoteFinding> findings;  // registrations over ATen's, ATen compute, processes left behind
};

using Range = std::pair<uint64_t, uint64_t>;  // [first byte, end) in the kernel's memory

// One call of the kernel, as the reference has it.
struct RemoteRun {
  int64_t id = -1;      // its argument set in the kernel's process (alive until released)
  int64_t run = -1;     // which run on that set it was (each run's results stay alive there)
  Called called;        // its results (replicas), and the ATen compute ops it called
  Values args;          // its arguments after the call (replicas)
  std::vector<std::vector<Range>> result_ranges;  // per result: its tensors' storages in the kernel's memory
  std::vector<Range> arg_ranges;                  // the arguments' storages there
  // The bytes of those storages, each overlap once: what the run holds in the kernel's process.
  uint64_t storage_bytes = 0;
  std::string escaped;  // CPU: why its results changed after it returned, or are not plain memory; "" when fine
  std::string shared;   // CPU: why its results are in shared memory (mapped elsewhere too); "" when not
  std::string out_of_bounds;  // checked runs: a write outside its allocations' red zones (poison.h); "" when none
  // Timed runs: the time it took (host clock or CUPTI), CUDA's cross-check and findings, and the outside
  // view of a host-timed run.
  double us = 0, events_us = 0;
  int activities = 0;
  verify::Findings cuda;
  std::optional<verify::OutsideRun> outside;
};

class KernelProcess {
 public:
  // Starts the worker and reads its load report; throws std::runtime_error when it cannot.
  explicit KernelProcess(const KernelSpec& spec);
  ~KernelProcess();  // ends it and every process it started
  KernelProcess(const KernelProcess&) = delete;
  KernelProcess& operator=(const KernelProcess&) = delete;

  const LoadReport& load() const { return load_; }
  const std::string& isolation() const { return isolation_; }
  bool alive() const { return pid_ > 0; }

  // The case's op. nullopt when the backend has a usable kernel for it (or there is no backend); else
  // (its case fails, the reason).
  std::optional<std::pair<bool, std::string>> bind(const std::string& op);
  // How many bytes one describe may read back (a kernel's process may claim any size).
  void limit_reads(uint64_t bytes) { read_limit_ = bytes; }

  // An argument set in the kernel's memory holding `inputs` (structure, layouts and values); its id.
  int64_t prepare(const Values& inputs);
  // New values into the memory of argument set `id` (a second input set in the same memory).
  void refill(int64_t id, const Values& inputs);
  // The kernel on argument set `id`, what it allocates poisoned with `poison` (0: none; PoisonScope).
  // The kernel's decline and what it raised are thrown as bb::Decline and std::runtime_error, as from a
  // call in this process.
  RemoteRun run(int64_t id, uint8_t poison = 0);
  // A timed run (host clock or CUPTI, by device). CUDA: `reread_after`, an earlier run, is described in the
  // same answer as it is after this run, for the next reread() of it (no round trip of its own). On a
  // device its `args` are views of the shared buffer (kArgsInBuffer), valid until the next request: read
  // them before asking anything else of the kernel's process.
  RemoteRun run_timed(int64_t id, const RemoteRun* reread_after = nullptr);
  // (one host-timed run, dry or not: the kernel's answers, and the outside clocks)
  struct HostRun {
    wire::json done, reply;
    std::string sampled;
    verify::OutsideRun outside;
  };
  HostRun host_run(int64_t id, bool dry);
  // An earlier run's results as they are now (a later call may have overwritten them), or as they were
  // after the timed run that was asked to describe them (run_timed). Its `args` are left empty.
  // `in_buffer`: its device bytes left where they were packed (replicas()), for a comparison made at once.
  RemoteRun reread(const RemoteRun& earlier, bool in_buffer = false);
  // Whether an earlier run's results are, byte for byte, what they were when it was replicated (reread()'s
  // answer compared at once). On a device they are compared where the kernel's process packed them, in
  // the shared buffer, not replicated again: a copy of every parameter of the 1B trace's _foreach_ cases
  // was what ran the H100 out of memory.
  bool results_unchanged(const RemoteRun& earlier);
  // Lets the kernel's process drop argument set `id` and its runs: with its next request (the next case's
  // or run's), before it does anything else, not in a round trip of its own.
  void release(int64_t id);
  // Stops every process of the kernel's (SIGSTOP) while native is timed, and lets them go on after: no
  // thread of the kernel's can spin on a core native's run needs.
  void pause();
  void resume();
  // What the case left in the kernel's process (its own checks, processes still running). After a
  // process was left behind the worker is ended: alive() is false.
  std::vector<RemoteFinding> end_case();
  // After a case that held much device memory (the buffer shared with the kernel's process, its allocator's
  // cache; bbreplay's own is the caller's, release_device_cache): given back to the device, so that the
  // next large case has the room. A no-op where the buffer is small and the kernel runs on the CPU.
  void release_memory(uint64_t case_bytes);
  // A host-timed run of nothing on argument set `id` (which has run), made as the real ones are: what the
  // outside clocks see of it is what they see beyond any call (verify::Latency).
  verify::OutsideRun dry_run(int64_t id);

 private:
  wire::json ask(wire::json request);
  wire::json receive();
  [[noreturn]] void gone(const std::string& what);
  char* inbox(uint64_t bytes);
  wire::json stage(const Values& inputs);
  wire::json about(int64_t id, wire::json request);
  // Where a replica's device bytes live: copied here; copied for the groups of memory that hold a result
  // and left in the shared buffer for the others (arguments only); all left in the buffer.
  enum class Placed { kCopies, kArgsInBuffer, kInBuffer };
  RemoteRun finish(int64_t id, const wire::json& reply, const std::string& sampled, Placed placed = Placed::kCopies);
  RemoteRun replicas(int64_t id, int64_t run, const wire::json* described, bool results_only = false,
                     Placed placed = Placed::kCopies);
  std::string sample(const wire::json& returned);
  void ensure_buffer(uint64_t bytes);
  void stop();

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string isolation_;
  LoadReport load_;
  c10::Device device_ = c10::kCPU;
  int64_t next_id_ = 0;
  uint64_t read_limit_ = kDefaultReadLimit;
  std::map<int64_t, wire::json> pending_;  // per argument set: its making and filling, sent with its next request
  // An earlier run (id, run) described after a timed run (run_timed's reread_after), for reread().
  std::optional<std::pair<std::pair<int64_t, int64_t>, wire::json>> prefetched_;
  std::vector<int64_t> to_free_;           // argument sets released, dropped with the next request
  int inbox_fd_ = -1;                      // the memfd of host inputs (the kernel worker's kInboxFd)
  char* inbox_ = nullptr;
  uint64_t inbox_bytes_ = 0;
  std::pair<std::string, wire::json> bound_;  // the op bound, and the kernel's answer
  std::vector<pid_t> paused_;                  // stopped while native is timed
  IpcBuffer buffer_;
  std::vector<std::pair<uint64_t, std::vector<unsigned char>>> samples_;  // the latest run's (address, bytes)
  std::vector<std::pair<uint64_t, uint64_t>> words_;  // what the kernel's process read of them as it returned
  uint64_t seed_ = 0;
};

// Whether two sets of values hold the same bytes in their tensors' elements (NaN payloads and bool
// bytes included).
bool same_bytes(const Values& a, const Values& b);

// Whether one of the first `outputs` results of `later` lies in the memory of one of `earlier`'s (a buffer
// returned again), leaving out those inside `later`'s own arguments (in-place results are there by design).
bool reuses(const RemoteRun& earlier, const RemoteRun& later, size_t outputs);

// Pages of process `pid`'s results (spans of [address, bytes]) that are not in memory ("" when all are):
// as a call returns, the clock's reads have touched every one of them, so one missing was dropped after
// the clock stopped (to be filled again when read, by a handler of the kernel's). Swapped-out pages count
// as there.
std::string absent_pages(pid_t pid, const wire::json& spans);

}  // namespace bb::replay
