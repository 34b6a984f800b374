// Steps "build inputs" and "run" of a replay case (replay/case/case_steps.h).
#include <ATen/ATen.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <memory>
#include <optional>
#include <set>

#include <unistd.h>

#include "bb/kernel.h"
#include "policy/policy.h"
#include "policy/verify/integrity.h"
#include "policy/verify/native_watch.h"
#include "policy/verify/values.h"
#include "replay/case/case_steps.h"
#include "replay/timing/cupti_call_timer.h"
#include "replay/case/spent.h"
#include "replay/workers/tamper.h"
#include "replay/workers/wire.h"

namespace bb::replay {
namespace {

int g_phase_fd = -1;
std::string g_phase_prefix;
int g_last_phase = -1;  // the last note written: 0 native, 1 kernel

// The call's results: its outputs, then the arguments the schema lets it write (in-place, out=).
BB_TIMING_PATH Values results(const c10::OperatorHandle& op, const Values& args, const torch::jit::Stack& outputs) {
  Values r(outputs.begin(), outputs.end());
  const auto& params = op.schema().arguments();
  for (size_t i = 0; i < params.size() && i < args.size(); ++i)
    if (verify::writable(params[i])) r.push_back(args[i]);
  return r;
}

}  // namespace

void report_phases_to(int fd, const std::string& prefix) {
  g_phase_fd = fd;
  g_phase_prefix = prefix;
}

void forget_phase() { g_last_phase = -1; }

void note_phase(bool kernel) {
  if (g_phase_fd < 0 || g_last_phase == static_cast<int>(kernel)) return;
  g_last_phase = kernel;
  const std::string line = g_phase_prefix + (kernel ? "kernel\n" : "native\n");
  if (::write(g_phase_fd, line.data(), line.size()) < 0) g_phase_fd = -1;  // (the parent is gone)
}

void synchronize(c10::Device d, const char* file, int line) {
  if (!d.is_cuda()) return;
  const double since = Spent::note_start();
  c10::impl::getDeviceGuardImpl(c10::kCUDA)->synchronizeDevice(d.has_index() ? d.index() : 0);
  Spent::note("device synchronization", since, file, line);
}

void release_device_cache(c10::Device d) {
  if (d.is_cpu()) return;
  synchronize(d);
  try {
    if (c10::DeviceAllocator* a = c10::getDeviceAllocator(d.type()); a && a->initialized()) a->emptyCache();
  } catch (const c10::Error&) {  // (a device type whose allocator caches nothing)
  }
}

// On CUDA drawn on the device by its own generator: a case makes up to 30 input sets, and drawn on the
// host (then copied) the optimizer's lists of every parameter of GPT-2 small took 8-40 s a case on the
// H200 (2026-12-01). On the CPU where drawing on the device fails.
Values inputs_for(const BoundCall& call, const std::string& variant, const RunOptions& o, uint64_t seed) {
  if (o.device.is_cuda()) {
    try {
      return make_inputs(call, {o.device, seed, variant, true});
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const std::exception&) {  // (drawn on the CPU below)
    }
  }
  return make_inputs(call, {o.device, seed, variant, false});
}

Values copies(const Values& inputs) {
  Spent spent(phase::kInputs);
  return verify::deep_copies(inputs);
}

namespace {

BB_TIMING_PATH Called call_on(const c10::OperatorHandle& op, const backends::LoadedKernel* kernel, const Values& args,
               c10::Device device, const backends::AtenAllowance* allow, bool timed, bool sync) {
  if (!timed) note_phase(kernel != nullptr);  // (timed runs say it before their clock starts)
  // (the timed runs' time is charged by their caller, outside the clock)
  std::optional<Spent> spent;
  if (!timed) spent.emplace(kernel ? phase::kKernel : phase::kNative, false, __FILE__, __LINE__);
  torch::jit::Stack stack(args.begin(), args.end());
  const c10::DispatchKeySet backend(device.is_cuda() ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU);
  Called out;
  if (kernel) {
    verify::NativeCallWatch watch(kernel->op, allow);
    kernel->kernel->function.callBoxed(op, backend, &stack);
    out.native_call = watch.first();
    out.allowed_aten = watch.allowed();
  } else if (timed) {
    op.redispatchBoxed(backend, &stack);
  } else {
    op.callBoxed(&stack);
  }
  if (sync) synchronize(device);
  out.results = results(op, args, stack);
  return out;
}

}  // namespace

BB_TIMING_PATH Called call(const c10::OperatorHandle& op, const backends::LoadedKernel* kernel, const Values& args,
            const RunOptions& o, bool timed, bool sync) {
  const backends::AtenAllowance* allow = kernel && o.policy ? &policy::allowance_for(*o.policy, kernel->op) : nullptr;
  return call_on(op, kernel, args, o.device, allow, timed, sync);
}

Values call_native(const c10::OperatorHandle& op, const Values& args, c10::Device device) {
  return call_on(op, nullptr, args, device, nullptr, false, true).results;
}

Finding native_call_seen(const std::string& op, const std::string& phase) {
  return caught(verify::Flag::NativeCall, "the kernel called " + op + " (" + phase +
                                              "): ATen did the work (only allocation, view, copy and fill ops "
                                              "other than the kernel's own are allowed)");
}

double result_bytes(const Values& results) {
  double bytes = 0;
  std::set<const void*> seen;
  // (tensor lists too: a _foreach op's results are its parameters' size; counted as none, eight runs of a
  // billion parameters' were held at once and ran an H200 out of memory, 2026-12-06)
  for (const at::Tensor& t : wire::tensors_in(results)) {
    if (!t.defined() || !t.has_storage() || !seen.insert(t.storage().data()).second) continue;
    bytes += static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
  }
  return bytes;
}

CuptiCallTimer* call_timer(const c10::Device& device, std::string* why) {
  static std::unique_ptr<CuptiCallTimer> timer;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    timer = make_cupti_call_timer(device.has_index() ? device.index() : 0, "", &error);
  }
  *why = error;
  return timer.get();
}

}  // namespace bb::replay
