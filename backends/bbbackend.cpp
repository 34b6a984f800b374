// bbbackend: build and check a backend folder ahead of time (the preload and replay do the same on
// demand, from the same cache).
//   bbbackend build DIR [--jobs N] [--cuda-arch 90]
// Exit codes: 0 every kernel usable, 1 some kernel could not be used, 2 usage error.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <climits>
#include <iostream>

#include "backends/loader.h"

namespace {

std::string exe_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string path = n > 0 ? std::string(buf, static_cast<size_t>(n)) : ".";
  return path.substr(0, path.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bbbackend: build and check bbshim backend folders"};
  app.require_subcommand(1);
  std::string dir, arch;
  int jobs = 0;
  CLI::App* build = app.add_subcommand("build", "compile every kernel of a backend folder (cached) and check it");
  build->add_option("dir", dir, "backend folder: one <op>__<overload>/ folder per kernel")->required();
  build->add_option("--jobs", jobs, "parallel compiles (default: BB_JOBS or the number of CPUs)");
  build->add_option("--cuda-arch", arch,
                    "GPU architecture for .cu kernels, e.g. 90 (default: BB_CUDA_ARCH, the GPU, 90)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto tc = bb::backends::make_toolchain(BB_TORCH_LIB_DIR, BB_TORCH_VERSION, exe_dir() + "/../include", arch);
  if (jobs > 0) tc.jobs = jobs;
  bb::backends::Backend backend = bb::backends::load_backend(dir, tc);
  for (const auto& k : backend.kernels) std::cout << "ok       " << k.op << "  (" << k.source << ")\n";
  for (const auto& p : backend.python_elsewhere)
    std::cout << "python   " << p << " (imported on the op's first call in a Python process: not built here)\n";
  for (const auto& p : backend.problems) std::cout << "problem  " << p << "\n";
  const size_t py = backend.python_elsewhere.size();
  std::cout << backend.kernels.size() << " kernels usable, "
            << (py ? std::to_string(py) + " Python folders (not imported here), " : std::string()) << backend.problems.size()
            << " problems; cache "
            << tc.cache_dir << "\n";
  return backend.problems.empty() && !(backend.kernels.empty() && backend.python_elsewhere.empty()) ? 0 : 1;
}
