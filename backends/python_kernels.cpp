#include "backends/python_kernels.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include "backends/python/bridge.h"
#include "tracer/format/op_name.h"
#include "tracer/log.h"

namespace bb::backends {
namespace {

const python::Bridge* open_bridge(const Toolchain& tc, PythonBridge& b) {
  if (b.tried) return static_cast<const python::Bridge*>(b.bridge);
  b.tried = true;
  struct stat st;
  if (tc.python_bridge.empty() || ::stat(tc.python_bridge.c_str(), &st) != 0) {
    b.why =
        "need bbshim's Python bridge (libbbshim_python.so), which this build lacks: it is built when CMake "
        "finds Python's headers (python3-dev)";
  } else if (void* lib = ::dlopen(tc.python_bridge.c_str(), RTLD_NOW | RTLD_LOCAL); !lib) {
    b.why = "cannot load " + tc.python_bridge + ": " + ::dlerror();
  } else if (auto fn = reinterpret_cast<const python::Bridge* (*)()>(::dlsym(lib, "bb_python_bridge_v1")); !fn) {
    b.why = tc.python_bridge + " is not bbshim's Python bridge";
  } else if (const python::Bridge* bridge = fn(); bridge->version != python::kBridgeVersion) {
    b.why = tc.python_bridge + " is a Python bridge of another bbshim version";
  } else {
    b.bridge = bridge;
  }
  return static_cast<const python::Bridge*>(b.bridge);
}

// The overloads of `op` (a name without overload) that a kernel written for the op as a whole can
// serve: all of an in-place op (add_), the functional ones otherwise (an out= overload must write its
// out argument, which a function returning a new tensor does not).
std::vector<std::string> overloads_of(const std::string& op) {
  std::vector<std::string> out;
  const std::string base = op.substr(op.rfind("::") + 2);
  const bool inplace = !base.empty() && base.back() == '_';
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name != op) continue;
    auto handle = c10::Dispatcher::singleton().findSchema(name);
    if (!handle || (!inplace && handle->schema().is_mutable())) continue;
    out.push_back(trace::join_op(name.name, name.overload_name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string module_prefix(const std::string& folder) {
  std::string name = "_bbshim_kernel_";
  for (char c : folder.substr(folder.rfind('/') + 1)) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "_";
}

}  // namespace

std::vector<std::string> python_overloads(const KernelDir& dir) {
  return dir.every_overload ? overloads_of(dir.op) : std::vector<std::string>{dir.op};
}

bool python_in_process() { return ::dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr; }

void load_python_kernels(const KernelDir& dir, const Toolchain& tc, PythonBridge& b, std::set<std::string>& taken,
                         Backend& out) {
  const std::vector<std::string> ops = python_overloads(dir);
  if (ops.empty()) {
    out.problems.push_back(dir.path + ": " + dir.op + " is not an op of this torch (BackendBench's folder per op)");
    return;
  }
  if (!python_in_process()) {  // bbbackend, or the preload in a program that is not Python
    out.python_elsewhere.push_back(
        dir.path + ": " + dir.python.front() +
        (dir.python.size() > 1 ? " and " + std::to_string(dir.python.size() - 1) + " more" : ""));
    return;
  }
  const python::Bridge* bridge = open_bridge(tc, b);
  if (!bridge) {
    out.problems.push_back(dir.path + ": Python kernels " + b.why);
    return;
  }
  out.python_load_seconds = bridge->load_seconds;
  std::vector<std::string> skipped;
  size_t loaded = 0;
  for (const std::string& op : ops) {
    std::optional<c10::OperatorHandle> handle;
    std::string obstacle = routing_obstacle(op, &handle);
    if (obstacle.empty() && !taken.insert(op).second) obstacle = "a second kernel for this op; the first is kept";
    if (!obstacle.empty()) {
      if (!dir.every_overload) out.problems.push_back(dir.python.front() + ": " + op + ": " + obstacle);
      skipped.push_back(op + " (" + obstacle + ")");
      continue;
    }
    python::KernelSpec spec{op,
                            dir.python,
                            dir.python_symbol,
                            module_prefix(dir.path),
                            [](const std::string& m) { log::warn("backend " + m); },
                            tc.python_import_timeout_s};
    const abi::Kernel* k = bridge->make_kernel(spec, handle->schema());
    out.kernels.push_back({op, dir.python.front(), tc.python_bridge, k, *handle});
    ++loaded;
  }
  if (dir.every_overload && !loaded) {
    std::string all;
    for (const auto& s : skipped) all += (all.empty() ? "" : "; ") + s;
    out.problems.push_back(dir.python.front() + ": no overload of " + dir.op + " can be routed: " + all);
  }
}

}  // namespace bb::backends
