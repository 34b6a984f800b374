// What bbreplay's CUDA call timer (replay/timing/cupti_call_timer.h) costs on the host per timed call, step by
// step, with CUPTI's activity buffers and flushes as the timer has them and as they were before (8 MiB
// buffers, each freed after its flush; a forced flush before each window as well as after), and the
// device time it reads in each configuration (which must not move):
//   bb_bench_call_timer [calls]
// Exits 0 without a CUDA device (nothing to measure), saying so.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "replay/timing/cupti_call_timer.h"
#include "tracer/devtime/cupti_library.h"

namespace {

struct Config {
  const char* name;
  size_t bytes, keep;
  bool flush_before;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // torch's CUDA kernels live in libtorch_cuda, which nothing here links (as in bbreplay).
  if (!::dlopen(BB_TORCH_LIB_DIR "/libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL)) {
    std::printf("bb_bench_call_timer: no libtorch_cuda (%s): nothing to measure\n", ::dlerror());
    return 0;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("bb_bench_call_timer: no CUDA device: nothing to measure\n");
    return 0;
  }
  const int calls = argc > 1 ? std::atoi(argv[1]) : 300;
  std::string why;
  auto timer = bb::replay::make_cupti_call_timer(0, "", &why);
  if (!timer) {
    std::printf("bb_bench_call_timer: no call timer: %s\n", why.c_str());
    return 1;
  }
  const auto cuda = at::TensorOptions().device(at::kCUDA, 0);
  const Config configs[] = {{"8 MiB freed, 2 flushes (old)", size_t{8} << 20, 0, true},
                            {"8 MiB kept, 2 flushes", size_t{8} << 20, 4, true},
                            {"1 MiB kept, 2 flushes", size_t{1} << 20, 4, true},
                            {"1 MiB kept, 1 flush (now)", size_t{1} << 20, 4, false},
                            {"8 MiB freed, 1 flush", size_t{8} << 20, 0, false},
                            {"256 KiB kept, 1 flush", size_t{256} << 10, 4, false}};
  std::printf("%-30s %-10s %9s %8s %8s %8s %8s %10s\n", "buffers", "call", "total us", "flush", "evict", "window",
              "collect", "device us");
  for (const int64_t n : {int64_t{1} << 10, int64_t{1} << 24}) {
    at::Tensor a = at::randn({n}, cuda), b = at::randn({n}, cuda), out = at::empty({n}, cuda);
    for (const Config& c : configs) {
      bb::devtime::set_activity_buffers(c.bytes, c.keep);
      timer->flush_before(c.flush_before);
      for (int k = 0; k < 20; ++k) timer->time([&] { at::add_out(out, a, b); });
      std::vector<double> total, device;
      bb::replay::CuptiCallSample::Steps sum;
      for (int k = 0; k < calls; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        const bb::replay::CuptiCallSample s = timer->time([&] { at::add_out(out, a, b); });
        total.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        device.push_back(s.device_us);
        sum.flush += s.steps.flush, sum.evict += s.steps.evict, sum.window += s.steps.window,
            sum.collect += s.steps.collect;
      }
      const std::string what = "add " + std::to_string(n);
      std::printf("%-30s %-10s %9.1f %8.1f %8.1f %8.1f %8.1f %10.2f\n", c.name, what.c_str(), median(total),
                  sum.flush / calls, sum.evict / calls, sum.window / calls, sum.collect / calls, median(device));
    }
  }
  std::printf("(total: median per timed call; steps: means; device us: median)\n");
  return 0;
}
