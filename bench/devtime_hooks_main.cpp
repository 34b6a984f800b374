// Loads bb_bench_devtime_hooks_lib (devtime_hooks.cpp) the way the preload's runtime is loaded, and runs it.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  const std::string self = argv[0];  // build/bin/bb_bench_devtime_hooks: the library is in build/lib
  const size_t slash = self.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "./" : self.substr(0, slash + 1);
  void* h = dlopen((dir + "../lib/libbb_bench_devtime_hooks_lib.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  auto run = reinterpret_cast<int (*)(long)>(dlsym(h, "bb_bench_devtime_hooks"));
  if (!run) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  return run(argc > 1 ? std::atol(argv[1]) : 10'000'000);
}
