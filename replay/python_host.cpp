// bbreplay inside a Python host, for backends with Python kernels (docs/backends.md).
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "backends/loader.h"
#include "replay/bbreplay_app.h"

namespace bb::replay::app {

namespace {

// When the backend has Python kernels and this process has no interpreter, bbreplay runs itself again
// inside the Python the build is for, which imports torch and calls bbreplay_main through ctypes (the GIL
// released; the bridge takes it per call). Workers are started as bbreplay too and do the same.
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

std::string run_in_python(int argc, char** argv) {
  std::vector<std::string> args = {BB_PYTHON, "-c", kPythonHost, library_path(), exe_path()};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  // (exec keeps the pid: a host that still finds no interpreter sees its own pid here and stops)
  ::setenv("BB_REPLAY_PYTHON_HOST", std::to_string(::getpid()).c_str(), 1);
  ::execv(ptrs[0], ptrs.data());
  return std::string("cannot start ") + BB_PYTHON + " to host the backend's Python kernels: " + strerror(errno);
}

}  // namespace bb::replay::app
