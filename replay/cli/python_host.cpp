// A kernel worker for Python kernels runs inside a Python host (docs/backends.md); bbreplay itself and its
// reference workers never do.
#include "backends/loader.h"
#include "replay/cli/bbreplay_app.h"

namespace bb::replay::app {

namespace {

// The kernel worker inside the Python the build is for, which imports torch and calls bbreplay_main
// through ctypes (the GIL released; the bridge takes it per call).
constexpr const char* kPythonHost =
    "import ctypes, os, sys\n"
    "import torch\n"
    "lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\n"
    "args = [a.encode() for a in sys.argv[2:]]\n"
    "argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)\n"
    "rc = lib.bbreplay_main(len(args), argv)\n"
    "sys.stdout.flush(); sys.stderr.flush()\n"
    "os._exit(rc)\n";

}  // namespace

bool has_python_kernels(const std::string& dir) {
  std::vector<std::string> problems;
  for (const auto& d : backends::scan_backend(dir, problems))
    if (!d.python.empty()) return true;
  return false;
}

std::vector<std::string> kernel_worker_argv(bool python) {
  if (!python) return {exe_path(), "--worker-kernel"};
  return {BB_PYTHON, "-c", kPythonHost, library_path(), exe_path(), "--worker-kernel"};
}

}  // namespace bb::replay::app
