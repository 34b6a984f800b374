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
};

// Why `op` cannot be routed at BackendSelect, or "" when it can (then *handle is set).
std::string routing_obstacle(const std::string& op, std::optional<c10::OperatorHandle>* handle);

Backend load_backend(const std::string& dir, const Toolchain& tc);

}  // namespace bb::backends
