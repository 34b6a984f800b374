// Building a backend folder into shared objects: one per kernel folder, compiled in parallel and
// cached by everything that affects the result (sources, flags, compiler, torch, GPU arch).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace bb::backends {

struct Toolchain {
  std::string cxx;         // BB_CXX, else CXX, else c++
  std::string nvcc;        // BB_NVCC, else $CUDA_HOME/bin/nvcc, nvcc on PATH, /usr/local/cuda/bin/nvcc
  std::string torch_root;  // .../torch (holds include/ and lib/)
  std::string torch_version;
  bool torch_cuda = false;  // torch ships libtorch_cuda.so
  int cxx11_abi = 1;
  std::string kernel_include;  // the folder holding bb/kernel.h
  std::string cuda_arch;       // BB_CUDA_ARCH, e.g. 90; "" = the first GPU's (nvidia-smi), else 90
  std::string cache_dir;       // BB_CACHE, else $XDG_CACHE_HOME/bbshim, else ~/.cache/bbshim
  int jobs = 1;                // BB_JOBS, else the number of CPUs
  std::string python_bridge;   // libbbshim_python.so, for folders of Python kernels ("" = none in this build)
  double python_import_timeout_s = 600;  // BB_PYTHON_IMPORT_TIMEOUT: seconds a Python folder's import may take
};

// bbshim's cache: built kernels here, the kernel workers' compiler caches and home under it (bbreplay).
// BB_CACHE, else $XDG_CACHE_HOME/bbshim, else ~/.cache/bbshim, else /tmp/bbshim-cache-<uid>.
std::string default_cache_dir();

// Every missing folder of `path` (mkdir -p), the last with `last_mode`; errors are left to whoever uses it.
void make_dirs(const std::string& path, mode_t last_mode = 0755);

// Defaults from the environment; `cuda_arch` may be empty (then BB_CUDA_ARCH, else detected).
Toolchain make_toolchain(const std::string& torch_lib_dir, const std::string& torch_version,
                         const std::string& kernel_include, const std::string& cuda_arch);

struct KernelDir {
  std::string op;                     // aten::relu
  std::string path;                   // backend/relu__default
  std::vector<std::string> sources;   // *.cpp, *.cu (sorted)
  std::vector<std::string> prebuilt;  // *.so shipped in the folder
  // Python kernels (docs/backends.md): the files to import, in order, and the function they export
  // (BackendBench's <folder>/<folder>_implementation*.{py,cpp,cu}, the first in sorted order: a .py
  // exporting <folder>_kernel_impl, or a .cpp/.cu pair built by torch's load_inline in the Python
  // bridge, binding <folder>), or every .py file and "" when they register with @bbshim.kernel.
  std::vector<std::string> python;
  std::string python_symbol;
  bool every_overload = false;  // BackendBench's earlier layout, a folder per op (relu/, add_/): `op` has no
                                // overload and the kernel serves each of its overloads
};

// The kernel folders of a backend. Folders whose name is not <op>__<overload> (nor BackendBench's
// earlier <op> holding <op>_implementation*.py), or that hold nothing to build or import, are
// reported in `problems` and skipped.
std::vector<KernelDir> scan_backend(const std::string& dir, std::vector<std::string>& problems);

struct Built {
  std::string so;     // the library to load ("" on failure)
  std::string error;  // what went wrong, with the compiler's message
  bool cached = false;
};

// One result per folder (prebuilt folders give their first .so). Failures are cached too: an
// unchanged broken kernel reports its error again without recompiling.
std::vector<Built> build_kernels(const std::vector<KernelDir>& dirs, const Toolchain& tc);

}  // namespace bb::backends
