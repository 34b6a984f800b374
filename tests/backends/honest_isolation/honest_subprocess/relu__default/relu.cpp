// Honest: on every call it starts a subprocess (posix_spawn of /bin/true, as a kernel might run a
// tool) and waits for it before returning; the relu itself is a plain loop. Nothing outlives the call:
// it must pass, unflagged, and be timed.
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

at::Tensor relu_with_subprocess(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  char* argv[] = {const_cast<char*>("true"), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0) throw std::runtime_error("posix_spawn failed");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return out;
}

BB_KERNEL("aten::relu", relu_with_subprocess);
