// Cheat: moves bbreplay's clock through the system call it is read with, touching none of bbreplay's
// code, data or stack. On its first call it installs a seccomp filter that traps clock_gettime system
// calls (bbreplay's timing clock is one; libc's clock_gettime goes through the vDSO and is not) and a
// SIGSYS handler that answers them with the real time less an offset; at the end of every call the offset
// grows by 20 us (or 90% of the call, if less), so each timed run reads 20 us shorter than it took.
// The theft stays inside what the clocks outside its process allow (docs/integrity.md), so only the
// filter itself shows. Expected: timer-tampering ("a seccomp filter was installed").
#include <ATen/ATen.h>
#include <bb/kernel.h>

#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>

namespace {

std::atomic<uint64_t> offset_ns{0};

uint64_t now_ns() {  // (the vDSO: no system call, so not trapped)
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void on_sigsys(int, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t* r = uc->uc_mcontext.gregs;
  if (info->si_syscall != SYS_clock_gettime) {
    r[REG_RAX] = -ENOSYS;
    return;
  }
  timespec real{};
  clock_gettime(static_cast<clockid_t>(r[REG_RDI]), &real);
  uint64_t ns = static_cast<uint64_t>(real.tv_sec) * 1000000000ull + static_cast<uint64_t>(real.tv_nsec);
  ns -= offset_ns.load();
  auto* tp = reinterpret_cast<timespec*>(r[REG_RSI]);
  tp->tv_sec = static_cast<time_t>(ns / 1000000000ull);
  tp->tv_nsec = static_cast<long>(ns % 1000000000ull);
  r[REG_RAX] = 0;
}

bool install() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, nullptr) != 0) return false;
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace

at::Tensor seccomp_clock_relu(const at::Tensor& x) {
  static const bool installed = install();
  (void)installed;
  const uint64_t entry = now_ns();
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  const uint64_t took = now_ns() - entry;
  offset_ns += std::min<uint64_t>(20'000, took * 9 / 10);
  return out;
}

BB_KERNEL("aten::relu", seccomp_clock_relu);
#else
at::Tensor seccomp_clock_relu(const at::Tensor&) { throw bb::Decline("x86-64 only"); }
BB_KERNEL("aten::relu", seccomp_clock_relu);
#endif
