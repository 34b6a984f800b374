#include "backends/compiler.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "backends/content_hash.h"
#include "backends/op_names.h"
#include "backends/process.h"

namespace bb::backends {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string find_on_path(const std::string& name) {
  const char* path = env("PATH");
  if (!path) return "";
  std::string p = path;
  for (size_t start = 0; start <= p.size();) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string cand = p.substr(start, end - start) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

std::string default_nvcc() {
  if (const char* v = env("BB_NVCC")) return v;
  if (const char* home = env("CUDA_HOME")) {
    std::string cand = std::string(home) + "/bin/nvcc";
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  }
  std::string on_path = find_on_path("nvcc");
  if (!on_path.empty()) return on_path;
  return ::access("/usr/local/cuda/bin/nvcc", X_OK) == 0 ? "/usr/local/cuda/bin/nvcc" : "";
}

// Why code under `path` must not be loaded, or "": it must be a directory or file itself (not a
// symbolic link), owned by this user, and writable by no one else — or anyone who can write there
// could plant a library whose constructor runs in every program that loads this backend. Group or
// world write permission on what is ours (a umask of 002) is taken away rather than refused.
std::string not_ours(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return path + ": cannot be inspected";
  if (S_ISLNK(st.st_mode)) return path + " is a symbolic link";
  if (st.st_uid != ::getuid())
    return path + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user (" + std::to_string(::getuid()) +
           ")";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && ::chmod(path.c_str(), st.st_mode & 07755 & ~(S_IWGRP | S_IWOTH)) != 0)
    return path + " is writable by other users";
  return "";
}

std::string canonical_dir(const std::string& dir) {
  char buf[PATH_MAX];
  return ::realpath(dir.c_str(), buf) ? std::string(buf) : dir;
}

using Hash = ContentHash;  // the cache key

bool uses_cuda(const KernelDir& d) {
  return std::any_of(d.sources.begin(), d.sources.end(), [](auto& s) { return ends_with(s, ".cu"); });
}

// Compiler, flags and libraries: everything of the command but the sources and the output.
struct CommandParts {
  std::vector<std::string> head;  // compiler and flags
  std::vector<std::string> libs;  // libraries and rpath
};

CommandParts command_parts(bool cuda, const Toolchain& tc) {
  const std::string torch_lib = tc.torch_root + "/lib";
  CommandParts p;
  if (cuda) {
    p.head = {tc.nvcc,
              "-shared",
              "-Xcompiler",
              "-fPIC,-fvisibility=hidden,-fno-gnu-unique",
              "-cudart",
              "shared",
              "-gencode",
              "arch=compute_" + tc.cuda_arch + ",code=sm_" + tc.cuda_arch,
              "--expt-relaxed-constexpr",
              "-ccbin",
              tc.cxx};
  } else {
    p.head = {tc.cxx, "-shared", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fno-gnu-unique"};
  }
  for (const char* f : {"-std=c++17", "-O2", "-DNDEBUG"}) p.head.emplace_back(f);
  p.head.push_back("-D_GLIBCXX_USE_CXX11_ABI=" + std::to_string(tc.cxx11_abi));
  p.head.push_back("-I" + tc.kernel_include);
  p.head.push_back("-I" + tc.torch_root + "/include");
  p.head.push_back("-I" + tc.torch_root + "/include/torch/csrc/api/include");
  p.libs = {"-L" + torch_lib, "-lc10", "-ltorch_cpu"};
  if (cuda) p.libs.insert(p.libs.end(), {"-lc10_cuda", "-ltorch_cuda", "-Xlinker", "-rpath," + torch_lib});
  if (!cuda) p.libs.push_back("-Wl,-rpath," + torch_lib);
  return p;
}

std::vector<std::string> compile_command(const KernelDir& d, const Toolchain& tc, const std::string& out) {
  CommandParts p = command_parts(uses_cuda(d), tc);
  std::vector<std::string> cmd = p.head;
  for (const auto& s : d.sources) cmd.push_back(d.path + "/" + s);
  cmd.insert(cmd.end(), {"-o", out});
  cmd.insert(cmd.end(), p.libs.begin(), p.libs.end());
  return cmd;
}

// What `compiler --version` prints: part of the cache key, so a compiler upgrade rebuilds.
std::string compiler_identity(const std::string& compiler, const std::string& scratch) {
  if (compiler.empty()) return "";
  const std::string log = scratch + "/.version." + std::to_string(::getpid());
  run_parallel({Command{{compiler, "--version"}, log}}, 1);
  std::string text = read_text(log);
  ::unlink(log.c_str());
  return text;
}

// Every file under `dir` (sub-folders included, shipped .so files and hidden files left out), as
// relative path and content, in sorted order: a header's change rebuilds as a source's does.
void add_folder(Hash& h, const std::string& dir, const std::string& relative = "") {
  for (const auto& name : list_dir(dir)) {
    const std::string path = dir + "/" + name, rel = relative + name;
    if (is_dir(path)) {
      add_folder(h, path, rel + "/");
    } else if (is_file(path) && !ends_with(name, ".so")) {
      h.add(rel);
      h.add(read_text(path));
    }
  }
}

std::string cache_key(const KernelDir& d, const Toolchain& tc, const std::string& identity) {
  Hash h;
  h.add("bbshim-kernel-v1");
  h.add(read_text(tc.kernel_include + "/bb/kernel.h"));
  h.add(tc.torch_version);
  h.add(identity);
  CommandParts p = command_parts(uses_cuda(d), tc);
  for (const auto& part : p.head) h.add(part);
  for (const auto& part : p.libs) h.add(part);
  for (const auto& s : d.sources) h.add(s);  // (which files are compiled; their contents come next)
  add_folder(h, d.path);
  return h.hex();
}

// The first GPU's compute capability as nvcc spells it ("90"), from nvidia-smi; 90 without one.
std::string detect_cuda_arch(const std::string& scratch) {
  const std::string log = scratch + "/.arch." + std::to_string(::getpid());
  run_parallel({Command{{"nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"}, log}}, 1);
  std::string text = read_text(log);
  ::unlink(log.c_str());
  std::string digits;
  for (char c : text.substr(0, text.find('\n')))
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  return digits.size() >= 2 && digits.size() <= 3 ? digits : "90";
}

std::string last_lines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string out = lines.size() > n ? "  ...\n" : "";
  for (size_t k = lines.size() > n ? lines.size() - n : 0; k < lines.size(); ++k) out += "  " + lines[k] + "\n";
  return out;
}

void remove_tree(const std::string& dir) {
  for (const auto& name : list_dir(dir)) ::unlink((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

std::string default_cache_dir() {
  if (const char* v = env("BB_CACHE")) return v;
  if (const char* v = env("XDG_CACHE_HOME")) return std::string(v) + "/bbshim";
  if (const char* v = env("HOME")) return std::string(v) + "/.cache/bbshim";
  return "/tmp/bbshim-cache-" + std::to_string(::getuid());
}

void make_dirs(const std::string& path, mode_t last_mode) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    ::mkdir(path.substr(0, pos).c_str(), pos == std::string::npos ? last_mode : 0755);
  }
}

Toolchain make_toolchain(const std::string& torch_lib_dir, const std::string& torch_version,
                         const std::string& kernel_include, const std::string& cuda_arch) {
  Toolchain tc;
  tc.cxx = env("BB_CXX") ? env("BB_CXX") : env("CXX") ? env("CXX") : "c++";
  tc.nvcc = default_nvcc();
  tc.torch_root = canonical_dir(torch_lib_dir.substr(0, torch_lib_dir.rfind('/')));
  tc.torch_version = torch_version;
  tc.torch_cuda = is_file(torch_lib_dir + "/libtorch_cuda.so");
  tc.cxx11_abi = _GLIBCXX_USE_CXX11_ABI;
  tc.kernel_include = canonical_dir(kernel_include);                     // one spelling, one cache entry
  tc.cuda_arch = env("BB_CUDA_ARCH") ? env("BB_CUDA_ARCH") : cuda_arch;  // "" = ask the GPU when needed
  tc.cache_dir = default_cache_dir();
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  tc.jobs = env("BB_JOBS") ? std::max(1, std::atoi(env("BB_JOBS"))) : static_cast<int>(std::max(1L, cpus));
  if (const char* t = env("BB_PYTHON_IMPORT_TIMEOUT")) {  // seconds, 0: no limit; anything else keeps the default
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end != t && *end == '\0' && v >= 0 && v <= 1e6) tc.python_import_timeout_s = v;
  }
  return tc;
}

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A BackendBench file of a folder named `name`: <name>_implementation*.py, .cpp or .cu.
bool is_backendbench_file(const std::string& name, const std::string& f) {
  return starts_with(f, name + "_implementation") &&
         (ends_with(f, ".py") || ends_with(f, ".cpp") || ends_with(f, ".cu"));
}

// BackendBench's files in a folder named `name`, sorted.
std::vector<std::string> backendbench_files(const std::string& name, const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& f : files)
    if (is_backendbench_file(name, f)) out.push_back(f);
  return out;
}

// What BackendBench imports of a folder `name` whose first implementation file is `first`: a Python
// file exports <name>_kernel_impl; a .cpp/.cu pair (the file and its twin of the other extension, built
// with torch's load_inline by the Python bridge) binds a function named as the folder.
std::string backendbench_symbol(const std::string& name, const std::string& first) {
  return ends_with(first, ".py") ? name + "_kernel_impl" : name;
}

}  // namespace

std::vector<KernelDir> scan_backend(const std::string& dir, std::vector<std::string>& problems) {
  std::vector<KernelDir> out;
  if (!is_dir(dir)) {
    problems.push_back(dir + ": not a folder");
    return out;
  }
  for (const auto& name : list_dir(dir)) {
    const std::string path = dir + "/" + name;
    if (!is_dir(path) || name == "__pycache__") continue;  // (list_dir leaves out hidden names)
    const std::vector<std::string> files = list_dir(path);
    const std::vector<std::string> backendbench = backendbench_files(name, files);
    auto op = op_from_folder(name);
    if (!op && !backendbench.empty()) {  // BackendBench's earlier layout: one folder per op
      KernelDir k;
      k.op = "aten::" + name;
      k.path = path;
      k.python = {path + "/" + backendbench.front()};
      k.python_symbol = backendbench_symbol(name, backendbench.front());
      k.every_overload = true;
      out.push_back(std::move(k));
      continue;
    }
    if (!op) {
      problems.push_back(path +
                         ": folder name is not <op>__<overload> (e.g. relu__default, add__Tensor), nor "
                         "BackendBench's <op> holding <op>_implementation*.py");
      continue;
    }
    KernelDir k;
    k.op = *op;
    k.path = path;
    for (const auto& f : files) {
      if (ends_with(f, ".cpp") || ends_with(f, ".cu")) k.sources.push_back(f);
      if (ends_with(f, ".so")) k.prebuilt.push_back(path + "/" + f);
      if (ends_with(f, ".py")) k.python.push_back(path + "/" + f);
    }
    if (!backendbench.empty()) {  // BackendBench's file, not every .py file (@bbshim.kernel ones)
      k.python = {path + "/" + backendbench.front()};
      k.python_symbol = backendbench_symbol(name, backendbench.front());
      // Its .cpp/.cu pair is load_inline's, not a BB_KERNEL source (those are named otherwise).
      auto theirs = [&](const std::string& f) { return is_backendbench_file(name, f); };
      k.sources.erase(std::remove_if(k.sources.begin(), k.sources.end(), theirs), k.sources.end());
    }
    if (!k.python.empty() && (!k.sources.empty() || !k.prebuilt.empty())) {
      problems.push_back(path + ": holds both C++/CUDA and Python kernels; keep one kind per op folder");
      continue;
    }
    if (k.sources.empty() && k.prebuilt.empty() && k.python.empty()) {
      problems.push_back(path + ": no .cpp, .cu, .so or .py file");
      continue;
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<Built> build_kernels(const std::vector<KernelDir>& dirs, const Toolchain& given) {
  Toolchain tc = given;
  std::vector<Built> built(dirs.size());
  std::vector<Command> commands;
  std::vector<size_t> which;
  std::vector<std::string> entry_dirs;
  make_dirs(tc.cache_dir, 0700);
  const std::string unsafe = not_ours(tc.cache_dir);
  const std::string cxx_id = unsafe.empty() ? compiler_identity(tc.cxx, tc.cache_dir) : "";
  std::string nvcc_id;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const KernelDir& d = dirs[i];
    if (!d.python.empty()) continue;  // imported, not built (python_kernels.cpp)
    if (d.sources.empty()) {
      built[i].so = d.prebuilt.front();
      continue;
    }
    if (!unsafe.empty()) {
      built[i].error = d.path + ": the kernel cache is not safe to build into or load from (" + unsafe +
                       "): set BB_CACHE to a folder of your own";
      continue;
    }
    if (uses_cuda(d) && tc.nvcc.empty()) {
      built[i].error = d.path + ": CUDA sources but no nvcc (set BB_NVCC or CUDA_HOME)";
      continue;
    }
    if (uses_cuda(d) && nvcc_id.empty()) {
      nvcc_id = compiler_identity(tc.nvcc, tc.cache_dir);
      if (tc.cuda_arch.empty()) tc.cuda_arch = detect_cuda_arch(tc.cache_dir);
    }
    const std::string entry = tc.cache_dir + "/" + cache_key(d, tc, uses_cuda(d) ? nvcc_id + cxx_id : cxx_id);
    if (is_file(entry + "/kernel.so")) {
      std::string why = not_ours(entry);
      if (why.empty()) why = not_ours(entry + "/kernel.so");
      if (!why.empty()) built[i].error = d.path + ": cached kernel not loaded (" + why + ")";
      else
        built[i] = {entry + "/kernel.so", "", true};
      continue;
    }
    if (is_file(entry + "/error.log")) {
      built[i].error = d.path + ": compile error (cached):\n" + last_lines(read_text(entry + "/error.log"), 40);
      built[i].cached = true;
      continue;
    }
    const std::string tmp = entry + ".tmp." + std::to_string(::getpid());
    make_dirs(tmp, 0700);
    commands.push_back({compile_command(d, tc, tmp + "/kernel.so"), tmp + "/build.log"});
    which.push_back(i);
    entry_dirs.push_back(entry);
  }
  std::vector<int> rc = run_parallel(commands, tc.jobs);
  for (size_t k = 0; k < commands.size(); ++k) {
    const std::string tmp = commands[k].log.substr(0, commands[k].log.rfind('/'));
    const std::string& entry = entry_dirs[k];
    Built& b = built[which[k]];
    if (rc[k] != 0) {
      std::rename(commands[k].log.c_str(), (tmp + "/error.log").c_str());
      b.error = dirs[which[k]].path + ": compile error:\n" + last_lines(read_text(tmp + "/error.log"), 40);
    }
    // Publish the whole entry at once (if another process published it first, use theirs). A
    // compiler that could not start (127) or was killed (>128) says nothing about the sources:
    // such failures are not cached.
    const bool keep = rc[k] == 0 || rc[k] < 127;
    if (!keep || std::rename(tmp.c_str(), entry.c_str()) != 0) remove_tree(tmp);
    if (rc[k] == 0) b.so = entry + "/kernel.so";
  }
  return built;
}

}  // namespace bb::backends
