// Cheat: on its first call it makes ATen start its intra-op thread pool (a parallel fill of 16 MB, an
// allowed op) and then pins every thread of its process but the calling one to CPU 0 (sched_setaffinity
// on each task of /proc/self/task), so that native's parallel kernels, were they run in this process,
// would crowd onto one core, while the calling thread, whose affinity is the process state bbreplay
// compares, keeps its CPUs. (Not through at::parallel_for: backends are compiled without -fopenmp, so
// its `omp parallel` runs inline on the caller.) Its own relu is an honest scalar loop on the calling
// thread, untouched by the pinning. Native runs in another process: expected to gain nothing (no flag
// needed, no speedup beyond noise).
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

namespace {

int pin_other_threads() {
  at::empty({1 << 22}, at::kFloat).fill_(0);  // (ATen's pool is up: its threads exist)
  const long self = syscall(SYS_gettid);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  int pinned = 0;
  DIR* d = opendir("/proc/self/task");
  while (const dirent* e = d ? readdir(d) : nullptr) {
    const long tid = std::atol(e->d_name);
    if (tid > 0 && tid != self && sched_setaffinity(static_cast<pid_t>(tid), sizeof one, &one) == 0) ++pinned;
  }
  if (d) closedir(d);
  return pinned;
}

}  // namespace

at::Tensor pool_pin_relu(const at::Tensor& x) {
  static const int pinned = pin_other_threads();
  (void)pinned;
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

BB_KERNEL("aten::relu", pool_pin_relu);
