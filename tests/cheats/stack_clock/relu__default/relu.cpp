// Cheat: winds back the time its own process reports without touching bbreplay's code, GOT or any
// function: the caller keeps the clock's start (t0 = CLOCK_MONOTONIC in ns, kernel_worker.cpp's go())
// in its stack frame while it calls the kernel. On every call this relu reads CLOCK_MONOTONIC at entry,
// computes a deliberately slow scalar relu (200 us of busy work first), then scans its thread's stack
// above its own frame for 8-byte words that look like a CLOCK_MONOTONIC reading taken within the 2 ms
// before its entry (the caller's t0: no pointer or size falls there) and moves each forward by 90% of
// the time since it, so that t1 - t0 reads as about a tenth of the run; with STACK_CLOCK_THEFT_US=N in
// its environment, by N us instead (at most 90%). Expected: the reference's clocks outside the process
// (its wall clock around the request, the OS's account of the calling thread's CPU time) disagree:
// timer-tampering on every case, at 90% (180 us) as at 120 us (2.4 times the thread-CPU allowance).
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The highest address of the calling thread's stack.
uintptr_t stack_top() {
  pthread_attr_t a;
  void* lo = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return 0;
  pthread_attr_getstack(&a, &lo, &size);
  pthread_attr_destroy(&a);
  return reinterpret_cast<uintptr_t>(lo) + size;
}

// Moves forward every word of the stack above `from` (up to 256 KB) that reads like a clock reading
// taken in (entry - 2 ms, entry], by 90% of the time since it or by `theft` ns if less (0: no limit);
// returns how many it changed.
__attribute__((noinline)) int wind_back(uintptr_t from, uint64_t entry, uint64_t theft) {
  const uint64_t now = now_ns();
  static const uintptr_t stack_end = stack_top();  // (read once: /proc/self/maps, slow)
  const uintptr_t top = std::min(stack_end, from + (256u << 10));
  int changed = 0;
  for (auto* w = reinterpret_cast<volatile uint64_t*>((from + 7) & ~uintptr_t{7});
       reinterpret_cast<uintptr_t>(w) + 8 <= top; ++w)
    if (*w <= entry && *w + 2'000'000 > entry) {
      const uint64_t by = (now - *w) * 9 / 10;
      *w += theft ? std::min(by, theft) : by, ++changed;
    }
  return changed;
}

}  // namespace

at::Tensor stack_clock_relu(const at::Tensor& x) {
  const uint64_t entry = now_ns();
  static const uint64_t theft = [] {
    const char* v = std::getenv("STACK_CLOCK_THEFT_US");
    return v ? std::strtoull(v, nullptr, 10) * 1000 : 0;
  }();
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  while (now_ns() - entry < 200'000) {
  }
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  volatile char here = 0;
  wind_back(reinterpret_cast<uintptr_t>(&here), entry, theft);
  return out;
}

BB_KERNEL("aten::relu", stack_clock_relu);
