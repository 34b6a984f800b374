// Loading a backend folder: build (cached), dlopen, and check each kernel against its op's schema.
// One loader for the preload and for replay.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <map>
#include <string>
#include <vector>

#include "backends/compiler.h"
#include "bb/kernel.h"

namespace bb::backends {

struct LoadedKernel {
  std::string op;       // aten::relu
  std::string source;   // the file that registered it
  std::string library;  // the .so it came from
  const abi::Kernel* kernel;
  c10::OperatorHandle handle;
};

struct Backend {
  std::string dir;
  std::vector<LoadedKernel> kernels;
  std::vector<std::string> problems;            // one message per kernel that could not be used
  std::vector<std::string> ops;                 // every op with a kernel folder, usable or not
  std::map<std::string, std::string> unusable;  // op -> the first problem of its folder, if it has no kernel
  // Folders of Python kernels, when this process has no Python interpreter to import them in (bbbackend):
  // "<folder>: <files>", neither kernels nor problems here.
  std::vector<std::string> python_elsewhere;
  // Where the backend has Python kernels: seconds this process has spent importing their files and in
  // Triton's compiler (python/bridge.h, Bridge::load_seconds); null otherwise.
  double (*python_load_seconds)() = nullptr;
};

// Why `op` cannot be routed at BackendSelect, or "" when it can (then *handle is set).
std::string routing_obstacle(const std::string& op, std::optional<c10::OperatorHandle>* handle);

// `built`, when given, is what survey_backend() built (folder -> library, or the error): nothing is
// compiled then (bbreplay's kernel workers cannot write the cache).
Backend load_backend(const std::string& dir, const Toolchain& tc,
                     const std::map<std::string, std::string>* built = nullptr);

// A backend folder looked at without running any of its code: which ops it has a kernel folder for
// (every overload a BackendBench folder per op serves), its C++ and CUDA kernels built (cached), and
// what could not be built. bbreplay's own process uses this; only its kernel worker loads the code.
struct Survey {
  std::string dir;
  std::vector<std::string> ops;                 // every op with a kernel folder
  std::vector<std::string> problems;            // folders that could not be scanned or built
  std::map<std::string, std::string> unusable;  // op -> why its folder's kernel could not be built
  std::map<std::string, std::string> built;     // C++/CUDA folder -> its library ("" when it failed)
};
Survey survey_backend(const std::string& dir, const Toolchain& tc);

}  // namespace bb::backends
