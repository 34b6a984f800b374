// The Python kernel bridge, libbbshim_python.so: what the loader (backends/loader.cpp) asks of it.
// The bridge turns a Python function in a backend folder into a kernel with the same ABI as a C++ one
// (bb/kernel.h), so that routing, decline, fallback, the native-call watch and shadow mode treat both
// alike. It needs a Python interpreter in the process (the preload inside a Python program) and links
// torch's libtorch_python; the loader opens it only for folders that hold Python kernels.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bb/kernel.h"

namespace bb::backends::python {

inline constexpr int kBridgeVersion = 3;

struct KernelSpec {
  std::string op;                  // aten::relu (an overload this torch has)
  std::vector<std::string> files;  // imported in this order on the kernel's first call
  std::string symbol;              // BackendBench: the exported function; "" for files that use @bbshim.kernel
  std::string module_prefix;       // modules are imported as <prefix><n>
  std::function<void(const std::string&)> warn;  // what importing said that is not a failure
  // Seconds a folder's import (or load_inline build) may take before it is interrupted and the op's calls
  // fall back (0: no limit). Only Python code is interrupted: a call blocked in C code is not.
  double import_timeout_s = 0;
};

struct Bridge {
  int version = kBridgeVersion;
  // A kernel that imports the files on its first call (with the GIL, once torch has finished importing)
  // and calls the function; a file that cannot be used makes every call fail with the reason.
  const abi::Kernel* (*make_kernel)(const KernelSpec& spec, const c10::FunctionSchema& schema);
  // Seconds this process has spent loading Python kernels (importing their files, on each kernel's first
  // call) and in Triton's compiler (each compile, as Triton's compile listener reports it, once Triton is
  // imported): bbreplay's kernel worker charges them to their own phase, out of "kernel runs".
  double (*load_seconds)();
};

}  // namespace bb::backends::python

// The loader finds the bridge through this one symbol.
extern "C" BB_ABI_EXPORT const bb::backends::python::Bridge* bb_python_bridge_v1();
