// The Python kernels of a backend folder (docs/backends.md, "Python kernels"): turned into kernels by
// the Python bridge (python/bridge.h), which the loader opens once per backend and only when needed.
#pragma once

#include <set>
#include <vector>
#include <string>

#include "backends/compiler.h"
#include "backends/loader.h"

namespace bb::backends {

struct PythonBridge {
  bool tried = false;
  const void* bridge = nullptr;  // a python::Bridge, once opened
  std::string why;               // why there is none
};

// Whether this process runs a Python interpreter (a Python program, or bbreplay in its Python host).
bool python_in_process();

// The overloads a Python kernel folder serves: its op, or for BackendBench's earlier layout (a folder
// per op) every overload the kernel can serve (python_kernels.cpp: all of an in-place op, the functional ones
// otherwise).
std::vector<std::string> python_overloads(const KernelDir& dir);

// Adds the folder's kernels to `out` (one per overload for BackendBench's earlier layout), or its problems.
void load_python_kernels(const KernelDir& dir, const Toolchain& tc, PythonBridge& bridge, std::set<std::string>& taken,
                         Backend& out);

}  // namespace bb::backends
