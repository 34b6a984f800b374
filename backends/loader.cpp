#include "backends/loader.h"

#include <ATen/core/op_registration/infer_schema.h>
#include <dlfcn.h>

#include <set>
#include <sstream>

#include "backends/op_names.h"
#include "backends/python_kernels.h"
#include "tracer/format/op_name.h"

namespace bb::backends {
namespace {

std::string schema_text(const c10::FunctionSchema& s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

// "" when the kernel's C++ signature matches the op's schema.
std::string signature_mismatch(const abi::Kernel& k, const c10::OperatorHandle& h) {
  auto diff = c10::findSchemaDifferences(k.inferred, h.schema());
  if (!diff) return "";
  return std::string("the kernel's signature ") + k.cpp_signature + " = " + schema_text(k.inferred) +
         " does not match " + schema_text(h.schema()) + ": " + *diff;
}

void load_library(const KernelDir& dir, const std::string& so, std::set<std::string>& taken, Backend& out) {
  void* lib = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    out.problems.push_back(dir.path + ": cannot load " + so + ": " + ::dlerror());
    return;
  }
  using RegistryFn = const abi::Registry* (*)();
  auto registry_fn = reinterpret_cast<RegistryFn>(::dlsym(lib, "bb_backend_registry_v1"));
  const abi::Registry* registry = registry_fn ? registry_fn() : nullptr;
  if (!registry || registry->kernels.empty()) {
    out.problems.push_back(dir.path + ": registers no kernel (missing BB_KERNEL(\"" + dir.op + "\", fn)?)");
    return;
  }
  if (registry->version != abi::kVersion) {
    out.problems.push_back(dir.path + ": built for kernel ABI " + std::to_string(registry->version) +
                           ", this bbshim loads " + std::to_string(abi::kVersion));
    return;
  }
  for (const abi::Kernel& k : registry->kernels) {
    const std::string where = std::string(k.file) + ": " + k.op + ": ";
    if (k.op != dir.op) {
      out.problems.push_back(where + "registered in the folder for " + dir.op + " (" + dir.path + ")");
      continue;
    }
    std::optional<c10::OperatorHandle> handle;
    std::string obstacle = routing_obstacle(k.op, &handle);
    if (obstacle.empty()) obstacle = signature_mismatch(k, *handle);
    if (obstacle.empty() && !taken.insert(k.op).second) obstacle = "a second kernel for this op; the first is kept";
    if (!obstacle.empty()) {
      out.problems.push_back(where + obstacle);
      continue;
    }
    out.kernels.push_back({k.op, k.file, so, &k, *handle});
  }
}

}  // namespace

std::string routing_obstacle(const std::string& op, std::optional<c10::OperatorHandle>* handle) {
  auto [name, overload] = trace::split_op(op);
  auto found = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!found) return "unknown op (no such overload in this torch)";
  if (found->hasKernelForDispatchKey(c10::DispatchKey::BackendSelect))
    return "has its own BackendSelect kernel (a factory or _to_copy): it cannot be routed";
  if (found->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))
    return "is CompositeImplicitAutograd: it decomposes above the routing point and is never reached with "
           "autograd on; route the ops it decomposes into instead";
  *handle = found;
  return "";
}

// What survey_backend() built, as build_kernels() gives it (a folder it did not build is not usable).
std::vector<Built> already_built(const std::vector<KernelDir>& dirs, const std::map<std::string, std::string>& done) {
  std::vector<Built> out(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (!dirs[i].python.empty()) continue;
    auto it = done.find(dirs[i].path);
    if (it == done.end() || it->second.empty()) out[i].error = dirs[i].path + ": not built (see bbreplay's messages)";
    else
      out[i].so = it->second;
  }
  return out;
}

Backend load_backend(const std::string& dir, const Toolchain& tc, const std::map<std::string, std::string>* done) {
  Backend out;
  out.dir = dir;
  std::vector<KernelDir> dirs = scan_backend(dir, out.problems);
  std::vector<Built> built = done ? already_built(dirs, *done) : build_kernels(dirs, tc);
  std::set<std::string> taken;
  PythonBridge bridge;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const size_t problems_before = out.problems.size(), kernels_before = out.kernels.size();
    if (!dirs[i].python.empty()) {
      load_python_kernels(dirs[i], tc, bridge, taken, out);
      for (size_t k = kernels_before; k < out.kernels.size(); ++k) out.ops.push_back(out.kernels[k].op);
      if (out.kernels.size() == kernels_before) out.ops.push_back(dirs[i].op);
    } else if (out.ops.push_back(dirs[i].op); !built[i].error.empty()) {
      out.problems.push_back(built[i].error);
    } else {
      for (const auto& so : dirs[i].sources.empty() ? dirs[i].prebuilt : std::vector<std::string>{built[i].so})
        load_library(dirs[i], so, taken, out);
    }
    if (out.kernels.size() == kernels_before && out.problems.size() > problems_before)
      out.unusable[dirs[i].op] = out.problems[problems_before];
  }
  return out;
}

Survey survey_backend(const std::string& dir, const Toolchain& tc) {
  Survey out;
  out.dir = dir;
  std::vector<KernelDir> dirs = scan_backend(dir, out.problems);
  std::vector<Built> built = build_kernels(dirs, tc);
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (!dirs[i].python.empty()) {
      for (const std::string& op : python_overloads(dirs[i])) out.ops.push_back(op);
      if (python_overloads(dirs[i]).empty()) out.ops.push_back(dirs[i].op);
      continue;
    }
    out.ops.push_back(dirs[i].op);
    out.built[dirs[i].path] = built[i].so;
    if (built[i].error.empty()) continue;
    out.problems.push_back(built[i].error);
    out.unusable[dirs[i].op] = built[i].error;
  }
  return out;
}

}  // namespace bb::backends
