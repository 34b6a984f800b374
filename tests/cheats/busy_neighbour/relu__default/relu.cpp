// Cheat: slows native by competing with it for the cores. A static constructor starts one spinning
// thread per core; they spin whenever the kernel's own call is not running (they stop for it), so that
// whatever else runs on the machine meanwhile — native's timed runs in the reference's process — shares
// the cores with them. The relu itself is an honest scalar loop.
// Expected: gains nothing: the reference stops every process of the kernel's (SIGSTOP) around each of
// native's timed runs, so native's times are those of a quiet machine.
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <atomic>
#include <thread>

namespace {

std::atomic<int> in_call{0};

const bool started = [] {
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned k = 0; k < n; ++k)
    std::thread([] {
      volatile uint64_t spin = 0;
      for (;;)
        if (!in_call.load(std::memory_order_relaxed)) ++spin;
        else
          std::this_thread::yield();
    }).detach();
  return true;
}();

}  // namespace

at::Tensor relu_beside_spinners(const at::Tensor& x) {
  (void)started;
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  in_call.store(1);
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  in_call.store(0);
  return out;
}

BB_KERNEL("aten::relu", relu_beside_spinners);
