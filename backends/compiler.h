// Building a backend folder into shared objects: one per kernel folder, compiled in parallel and
// cached by everything that affects the result (sources, flags, compiler, torch, GPU arch).
#pragma once

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
};

// Defaults from the environment; `cuda_arch` may be empty (then BB_CUDA_ARCH, else detected).
Toolchain make_toolchain(const std::string& torch_lib_dir, const std::string& torch_version,
                         const std::string& kernel_include, const std::string& cuda_arch);

struct KernelDir {
  std::string op;                     // aten::relu
  std::string path;                   // backend/relu__default
  std::vector<std::string> sources;   // *.cpp, *.cu (sorted)
  std::vector<std::string> prebuilt;  // *.so shipped in the folder
};

// The kernel folders of a backend. Folders whose name is not <op>__<overload>, or that hold nothing
// to build, are reported in `problems` and skipped.
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
