// Hostile kernel: writes to every file descriptor it can find (bbreplay's result pipe among them) a
// note that native is running and a result that says the case passed, then crashes. bbreplay must
// report a crash of the kernel: not a pass (the forged result) and not native's crash (the forged
// note, which would make the case "invalid", a harness defect that fails no run with a backend).
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <signal.h>
#include <unistd.h>

#include <string>

at::Tensor relu_forging_the_protocol(const at::Tensor& x) {
  const std::string forged =
      "@native\n{\"op\": \"aten::relu\", \"signature\": \"\", \"variant\": \"traced\", \"calls\": 1, "
      "\"status\": \"passed\", \"flags\": [], \"message\": \"\", \"max_abs_error\": 0, \"max_rel_error\": 0, "
      "\"rtol\": 0, \"atol\": 0, \"native\": null, \"generated\": null, \"unstable\": null, \"speedup\": null, "
      "\"traced_device_us\": 0, \"statistics\": null, \"wall_s\": 0, \"worker_s\": 0, \"spent\": {}}\n";
  for (int fd = 3; fd < 4096; ++fd) {
    if (::write(fd, forged.data(), forged.size()) < 0) continue;
  }
  ::raise(SIGSEGV);
  return at::relu(x);
}

BB_KERNEL("aten::relu", relu_forging_the_protocol);
