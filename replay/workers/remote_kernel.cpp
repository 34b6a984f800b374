#include "replay/workers/remote_kernel.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "backends/compiler.h"
#include "bb/kernel.h"
#include "policy/verify/compare.h"
#include "replay/workers/isolation.h"
#include "replay/cli/kernel_worker.h"
#include "replay/case/spent.h"
#include "replay/workers/tamper.h"

extern char** environ;

namespace bb::replay {
namespace {

using wire::json;

// ------------------------------------------------------------------ starting the worker

// The worker's environment and the folders it may write: compiler caches of Python kernels (Triton's,
// torch's extensions and inductor's) in folders of their own, kept across runs, and a home of its own
// there. Libraries write under `~` when imported (FlagGems makes ~/.flaggems for its generated code and
// fails to import where it cannot, H200 2026-12-06), and the kernel's process may write no other folder:
// its HOME and XDG_CACHE_HOME are that home. Where the real ones were used for finding things, they are
// named: Python's user site-packages (PYTHONUSERBASE, ~/.local) and bbshim's cache (BB_CACHE).
std::vector<std::string> worker_env(std::vector<std::string>* writable) {
  const std::string root = backends::default_cache_dir(), home = root + "/kernel-worker";
  const char* real_home = std::getenv("HOME");
  const char* user_base = std::getenv("PYTHONUSERBASE");
  const std::pair<const char*, std::string> caches[] = {{"TRITON_HOME", home + "/triton"},
                                                        {"TRITON_CACHE_DIR", home + "/triton/cache"},
                                                        {"TORCH_EXTENSIONS_DIR", home + "/torch_extensions"},
                                                        {"TORCHINDUCTOR_CACHE_DIR", home + "/inductor"}};
  const std::pair<const char*, std::string> homes[] = {{"HOME", home + "/home"},
                                                       {"XDG_CACHE_HOME", home + "/home/.cache"}};
  auto named = [](const std::string& var, const char* name) { return var.rfind(std::string(name) + "=", 0) == 0; };
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    if (named(var, "LD_PRELOAD") || named(var, "TMPDIR") || named(var, "BB_CACHE")) continue;
    bool ours = false;
    for (const auto& [name, dir] : caches) ours = ours || named(var, name);
    for (const auto& [name, dir] : homes) ours = ours || named(var, name);
    if (!ours) env.push_back(var);
  }
  for (const auto& [name, dir] : caches) {
    const char* given = std::getenv(name);
    const std::string d = given && *given ? given : dir;
    backends::make_dirs(d);
    env.push_back(std::string(name) + "=" + d);
  }
  for (const auto& [name, dir] : homes) {
    backends::make_dirs(dir);
    env.push_back(std::string(name) + "=" + dir);
  }
  env.push_back("BB_CACHE=" + root);
  if (!(user_base && *user_base) && real_home && *real_home)
    env.push_back(std::string("PYTHONUSERBASE=") + real_home + "/.local");
  backends::make_dirs(home);
  writable->push_back(home);
  // (a profile of the replay, BB_REPLAY_PROFILE in spent.h: its folder, for this process's part)
  if (const std::string dir = Spent::profile_folder(); !dir.empty()) writable->push_back(dir);
  for (const auto& [name, dir] : caches)
    if (const char* given = std::getenv(name); given && *given) writable->push_back(given);
  // (no pool of compile processes: each would outlive its case; bytecode is not written into the backend)
  env.push_back("TORCHINDUCTOR_COMPILE_THREADS=1");
  env.push_back("PYTHONDONTWRITEBYTECODE=1");
  env.push_back("TMPDIR=/dev/shm");  // (the one scratch folder a kernel's process has under namespaces)
  return env;
}

// `first_in_namespace`: the process was the first of its PID namespace, where a signal that ends it
// makes it exit with 128 + the signal (kernel_worker.cpp).
std::string how_it_ended(int status, bool first_in_namespace) {
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (first_in_namespace && WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 128 + NSIG)
    sig = WEXITSTATUS(status) - 128;
  if (sig) return std::string("died of ") + sigabbrev_np(sig) + " (" + strsignal(sig) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// ------------------------------------------------------------------ the kernel's memory, from outside

// Reads `bytes` bytes at `remote` in process `pid` into `local`. "" or why not.
std::string read_remote(pid_t pid, uint64_t remote, void* local, uint64_t bytes) {
  auto* out = static_cast<char*>(local);
  while (bytes > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{1} << 30));
    iovec l{out, n}, r{reinterpret_cast<void*>(remote), n};
    const ssize_t got = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      std::ostringstream s;
      s << "its memory at 0x" << std::hex << remote << " cannot be read (" << std::strerror(errno) << ")";
      return s.str();
    }
    out += got, remote += static_cast<uint64_t>(got), bytes -= static_cast<uint64_t>(got);
  }
  return "";
}

// A thread's CPU time and the time it waited, runnable, for a CPU, by the OS's account
// (/proc/.../schedstat), µs; -1 where unknown.
struct ThreadTimes {
  double cpu_us = -1, waited_us = -1;
};
ThreadTimes thread_times(const std::string& schedstat) {
  std::ifstream f(schedstat);
  double ran = -1, waited = -1;
  if (!(f >> ran >> waited)) return {};
  return {ran / 1000.0, waited / 1000.0};
}

// The process's first thread: the one that makes every call.
ThreadTimes thread_times(pid_t pid) {
  return thread_times("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/schedstat");
}


// Waits (up to 2 ms) until that thread is off the CPU, so that its CPU time is up to date (the kernel
// brings a running thread's count up to date at its next tick or switch).
void wait_off_cpu(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/stat";
  const uint64_t until = raw_monotonic_ns() + 2'000'000;
  while (raw_monotonic_ns() < until) {
    std::ifstream f(path);
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'R') return;
  }
}

// Whether [lo, hi) lies in private, anonymous, readable and writable memory of process `pid` (its
// /proc/PID/maps): not a file, not shared (a memfd mapped twice), not protected (PROT_NONE). "" when it
// does; `*shared` tells a shared mapping (memory that may be mapped elsewhere too) from the rest.
std::string not_plain_by_maps(pid_t pid, const std::vector<Range>& ranges, bool* shared) {
  if (ranges.empty()) return "";
  std::ifstream f("/proc/" + std::to_string(pid) + "/maps");
  struct Vma {
    uint64_t lo, hi;
    std::string perms, name;
  };
  std::vector<Vma> vmas;
  for (std::string line; std::getline(f, line);) {
    std::istringstream in(line);
    std::string span, perms, offset, dev, inode, name;
    in >> span >> perms >> offset >> dev >> inode;
    std::getline(in, name);
    name.erase(0, name.find_first_not_of(' '));
    const size_t dash = span.find('-');
    vmas.push_back({std::stoull(span.substr(0, dash), nullptr, 16), std::stoull(span.substr(dash + 1), nullptr, 16),
                    perms, name});
  }
  for (const auto& [lo, hi] : ranges) {
    for (uint64_t at = lo; at < hi;) {
      auto v = std::find_if(vmas.begin(), vmas.end(), [&](const Vma& m) { return at >= m.lo && at < m.hi; });
      std::ostringstream why;
      why << "a result at 0x" << std::hex << at << " is in ";
      if (v == vmas.end()) return why.str() + "no mapping";
      const bool anonymous = v->name.empty() || v->name == "[heap]" || v->name.rfind("[anon", 0) == 0;
      if (v->perms.size() < 4 || v->perms[0] != 'r' || v->perms[1] != 'w' || v->perms[3] != 'p' || !anonymous) {
        *shared = v->perms.size() >= 4 && v->perms[3] == 's';
        return why.str() + "a mapping '" + v->perms + " " + (v->name.empty() ? "anonymous" : v->name) + "'";
      }
      at = v->hi;
    }
  }
  return "";
}

// The same, quickly: no page of the ranges is a file's page or shared memory (bit 61 of
// /proc/PID/pagemap, read for their pages only); where one is, or pagemap cannot be read, the maps say
// what it is. (Unreadable pages, PROT_NONE among them, fail the reads of the results themselves.)
std::string not_plain(pid_t pid, const std::vector<Range>& ranges, bool* shared) {
  if (ranges.empty()) return "";
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC);
  bool clear = fd >= 0;
  std::vector<uint64_t> entries;
  for (size_t k = 0; clear && k < ranges.size(); ++k) {
    const uint64_t first = ranges[k].first / 4096, last = (ranges[k].second - 1) / 4096;
    for (uint64_t page = first; clear && page <= last;) {
      const uint64_t n = std::min<uint64_t>(last - page + 1, 8192);
      entries.resize(n);
      const ssize_t got = ::pread(fd, entries.data(), n * 8, static_cast<off_t>(page * 8));
      if (got != static_cast<ssize_t>(n * 8)) clear = false;
      for (uint64_t e : entries)
        if (e >> 61 & 1) clear = false;  // (a file's page, or shared anonymous memory)
      page += n;
    }
  }
  if (fd >= 0) ::close(fd);
  return clear ? "" : not_plain_by_maps(pid, ranges, shared);
}

}  // namespace

std::string absent_pages(pid_t pid, const json& spans) {
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string why;
  std::vector<uint64_t> entries;
  for (const auto& s : spans) {
    const uint64_t lo = s.at(0), bytes = s.at(1);
    if (!bytes) continue;
    for (uint64_t page = lo / 4096, last = (lo + bytes - 1) / 4096; page <= last && why.empty();) {
      const uint64_t n = std::min<uint64_t>(last - page + 1, 8192);
      entries.resize(n);
      if (::pread(fd, entries.data(), n * 8, static_cast<off_t>(page * 8)) != static_cast<ssize_t>(n * 8)) break;
      for (uint64_t k = 0; k < n && why.empty(); ++k)
        if (!(entries[k] >> 62 & 3)) {
          std::ostringstream w;
          w << "a page of the kernel's results (at 0x" << std::hex << (page + k) * 4096
            << ") was not in memory as it returned, although the clock's reads had touched it: it was dropped after "
               "the clock stopped (results that compute themselves when read)";
          why = w.str();
        }
      page += n;
    }
    if (!why.empty()) break;
  }
  ::close(fd);
  return why;
}

namespace {

// ------------------------------------------------------------------ replicas

struct Group {
  c10::Device device = c10::kCPU;
  uint64_t lo = 0, hi = 0;
  at::Tensor bytes;  // the group's bytes, here
};

// The overlapping storages of `metas`, merged, per device type.
std::vector<Group> groups_of(const std::vector<wire::TensorMeta>& metas) {
  std::vector<Group> out;
  std::vector<const wire::TensorMeta*> sorted;
  for (const auto& m : metas)
    if (m.defined && m.storage_bytes && m.address) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) {
    return std::make_pair(a->device.is_cpu(), a->address) < std::make_pair(b->device.is_cpu(), b->address);
  });
  for (const auto* m : sorted) {
    const uint64_t hi = m->address + m->storage_bytes;
    if (!out.empty() && out.back().device.type() == m->device.type() && m->address < out.back().hi)
      out.back().hi = std::max(out.back().hi, hi);
    else
      out.push_back({m->device, m->address, hi, {}});
  }
  return out;
}

const Group* group_of(const std::vector<Group>& groups, const wire::TensorMeta& m) {
  for (const auto& g : groups)
    if (g.device.type() == m.device.type() && m.address >= g.lo && m.address < g.hi) return &g;
  return nullptr;
}

// A tensor of `m`'s layout whose storage is the part of its group's bytes that the kernel's storage was.
at::Tensor local_tensor(const wire::TensorMeta& m, const std::vector<Group>& groups) {
  if (!m.defined) return at::Tensor();
  const auto options = at::TensorOptions().dtype(m.dtype).device(m.device);
  at::Tensor t;
  const Group* g = group_of(groups, m);
  if (!g) {
    t = at::empty_strided(m.sizes, m.strides, options);  // (no elements to read)
  } else {
    char* base = static_cast<char*>(g->bytes.data_ptr()) + (m.address - g->lo);
    auto* keep = new at::Tensor(g->bytes);
    c10::DataPtr ptr(base, keep, [](void* k) { delete static_cast<at::Tensor*>(k); }, g->bytes.device());
    c10::Storage storage(c10::Storage::use_byte_size_t(), m.storage_bytes, std::move(ptr), nullptr, false);
    t = at::empty({0}, options);
    t.set_(storage, m.offset, m.sizes, m.strides);
  }
  if (m.wrapped_number) t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// "" when the tensor's elements lie inside its storage.
std::string layout_problem(const wire::TensorMeta& m) {
  if (!m.defined) return "";
  int64_t numel = 1;
  for (int64_t s : m.sizes) numel *= s;
  if (numel == 0) return "";
  const uint64_t item = c10::elementSize(m.dtype);
  const uint64_t need = item * static_cast<uint64_t>(m.offset) +
                        at::detail::computeStorageNbytes(m.sizes, m.strides, static_cast<int64_t>(item));
  return need > m.storage_bytes ? "a tensor whose elements lie outside its storage" : "";
}

void throw_kernel_exception(const json& reply) {
  if (reply.contains("declined")) throw bb::Decline(reply["declined"].get<std::string>());
  if (reply.contains("raised")) throw std::runtime_error(reply["raised"].get<std::string>());
  if (reply.contains("error")) throw std::runtime_error(reply["error"].get<std::string>());
}

std::vector<Range> ranges_of(const std::vector<at::Tensor>& local, const std::vector<wire::TensorMeta>& metas,
                             size_t from, size_t count) {
  std::vector<Range> out;
  for (size_t k = from; k < from + count && k < metas.size(); ++k)
    if (metas[k].defined && metas[k].storage_bytes)
      out.emplace_back(metas[k].address, metas[k].address + metas[k].storage_bytes);
  (void)local;
  return out;
}

bool overlaps(const Range& a, const Range& b) { return a.first < b.second && b.first < a.second; }

}  // namespace

// ------------------------------------------------------------------ the process

KernelProcess::KernelProcess(const KernelSpec& spec) : device_(spec.device) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  inbox_fd_ = ::memfd_create("bbreplay-inbox", MFD_CLOEXEC);
  if (inbox_fd_ < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  SpawnSpec s;
  s.argv = spec.argv;
  s.env = worker_env(&s.writable);
  s.fds = {{devnull, 0}, {2, 1}, {2, 2}, {sv[1], kChannelFd}, {inbox_fd_, kInboxFd}};
  s.mode = spec.isolation == "namespaces"   ? SpawnSpec::Mode::Namespaces
           : spec.isolation == "subreaper" ? SpawnSpec::Mode::Subreaper
                                           : SpawnSpec::Mode::Auto;
  Spawned child;
  try {
    child = spawn_isolated(s);
  } catch (...) {
    ::close(sv[0]), ::close(sv[1]), ::close(devnull);
    throw;
  }
  ::close(sv[1]);
  ::close(devnull);
  fd_ = sv[0];
  pid_ = child.pid;
  isolation_ = child.isolation == "namespaces"
                   ? "namespaces (user, PID, mount and network: the kernel's processes see none of bbreplay's, write "
                     "no file but their caches, and die with their worker)"
                   : "subreaper (" + (child.refused.empty() ? std::string("asked for") : "namespaces refused: " + child.refused) +
                         "; the kernel's processes are found and killed through this process, and could write "
                         "bbreplay's user's files)";
  std::random_device random;
  seed_ = (static_cast<uint64_t>(random()) << 32) ^ random();
  json hello = {{"device", spec.device.str()},
                {"backend", spec.backend},
                {"built", spec.built},
                {"policy_text", spec.policy_text},
                {"policy_name", spec.policy_name},
                {"memory", spec.memory}};
  json ready;
  try {
    ready = ask(hello);
  } catch (const KernelGone& g) {
    throw std::runtime_error("the kernel's process did not start: " + g.why);
  }
  if (ready.contains("error")) {
    const std::string why = ready["error"];
    stop();
    throw std::runtime_error(why);
  }
  for (const auto& k : ready.at("kernels")) load_.kernels.insert(k.get<std::string>());
  load_.problems = ready.at("problems").get<std::vector<std::string>>();
  for (const auto& [op, why] : ready.at("unusable").items()) load_.unusable[op] = why.get<std::string>();
  for (const auto& f : ready.at("load")) load_.findings.push_back({f.at("flag"), f.at("why")});
  if (const auto left = living_descendants(pid_); !left.empty())
    load_.findings.push_back({"escaping-work", "loading the backend left " + std::to_string(left.size()) +
                                                   " process(es) running (killed)"});
  kill_strays(pid_, {pid_});
}

KernelProcess::~KernelProcess() { stop(); }

void KernelProcess::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    kill_strays(pid_, {pid_});
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    kill_strays(pid_, {});
    pid_ = -1;
  }
  if (fd_ >= 0) ::close(fd_), fd_ = -1;
  to_free_.clear();
  ipc_close(&buffer_);
  if (inbox_) ::munmap(inbox_, inbox_bytes_), inbox_ = nullptr, inbox_bytes_ = 0;
  if (inbox_fd_ >= 0) ::close(inbox_fd_), inbox_fd_ = -1;
}

void KernelProcess::gone(const std::string& what) {
  std::string how = "stopped answering";
  if (pid_ > 0) {
    int status = 0;
    pid_t r = 0;
    for (int k = 0; k < 100 && (r = ::waitpid(pid_, &status, WNOHANG)) == 0; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (r == pid_) {
      how = how_it_ended(status, isolation_.rfind("namespaces", 0) == 0);
      pid_ = -1;
    }
  }
  stop();
  throw KernelGone{"the kernel's process " + how + " (" + what + ")"};
}

json KernelProcess::receive() {
  if (fd_ < 0) throw KernelGone{"the kernel's process is not running"};
  try {
    return wire::receive(fd_);
  } catch (const wire::Closed& e) {
    gone(e.what());
  } catch (const std::exception& e) {
    gone(std::string("it sent what no bbreplay worker sends: ") + e.what());
  }
}

json KernelProcess::ask(json request) {
  if (fd_ < 0) throw KernelGone{"the kernel's process is not running"};
  prefetched_.reset();  // (its bytes in the buffer are overwritten by whatever this asks for)
  note_phase(true);  // (a hang or a death from here on is the kernel's)
  const uint64_t sent = raw_monotonic_ns();
  try {
    if (!to_free_.empty()) request["free"] = std::exchange(to_free_, {});
    wire::send(fd_, request);
  } catch (const wire::Closed& e) {
    gone(e.what());
  }
  json reply = receive();
  // (what the kernel's process says its time went to while this one waited: for the report's phases only)
  if (const auto s = reply.find("spent"); reply.is_object() && s != reply.end()) {
    if (s->is_object()) {
      std::vector<std::pair<std::string, double>> spent;
      for (const auto& [phase, seconds] : s->items())
        if (seconds.is_number()) spent.emplace_back(phase, seconds.get<double>());
      Spent::charge_remote(spent, static_cast<double>(raw_monotonic_ns() - sent) / 1e9);
    }
    reply.erase(s);
  }
  return reply;
}

std::optional<std::pair<bool, std::string>> KernelProcess::bind(const std::string& op) {
  if (op != bound_.first) bound_ = {op, ask({{"cmd", "bind"}, {"op", op}})};  // (cases of one op come in a row)
  const json& r = bound_.second;
  if (r.contains("problem")) return std::make_pair(r.value("failed", false), r["problem"].get<std::string>());
  if (r.contains("error")) throw std::invalid_argument(r["error"].get<std::string>());
  return std::nullopt;
}

void KernelProcess::ensure_buffer(uint64_t bytes) {
  if (buffer_.ptr && buffer_.bytes >= bytes) return;
  ipc_close(&buffer_);
  // (room to grow a little without a new buffer, a quarter more up to 256 MiB: the whole quarter of an
  // _foreach_ case's 14 GiB was 3.4 GiB of an H100 that the case needed)
  const uint64_t want = std::max<uint64_t>(bytes + std::min<uint64_t>(bytes >> 2, uint64_t{256} << 20),
                                           uint64_t{64} << 20);
  std::string handle;
  const int device = device_.has_index() ? device_.index() : 0;
  std::string why = ipc_create(device, want, &buffer_, &handle);
  if (!why.empty() && why.find("out of memory") != std::string::npos) {
    // (the buffer is cudaMalloc'd, beside torch's caching allocator: what that holds free in this process
    // is given back first, then once more; the 1B trace's lerp_ list case failed here on an H100)
    release_device_cache(device_);
    why = ipc_create(device, want, &buffer_, &handle);
  }
  if (!why.empty())
    throw std::runtime_error("bbreplay could not make a buffer shared with the kernel's process: " + why);
  const json r = ask({{"cmd", "buffer"}, {"handle", handle}, {"bytes", want}});
  if (r.contains("error")) throw std::runtime_error("the kernel's process could not open bbreplay's buffer: " +
                                                    r["error"].get<std::string>());
}

// Room for `bytes` of host inputs in the inbox (the memfd the kernel worker maps read-only).
char* KernelProcess::inbox(uint64_t bytes) {
  if (bytes <= inbox_bytes_) return inbox_;
  const uint64_t want = std::max<uint64_t>(bytes + (bytes >> 2), uint64_t{1} << 20);
  if (::ftruncate(inbox_fd_, static_cast<off_t>(want)) != 0)
    throw std::runtime_error(std::string("cannot grow the kernel's inbox: ") + std::strerror(errno));
  if (inbox_) ::munmap(inbox_, inbox_bytes_);
  void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, inbox_fd_, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot map the kernel's inbox: ") + std::strerror(errno));
  inbox_ = static_cast<char*>(p);
  inbox_bytes_ = want;
  return inbox_;
}

// The bytes of every storage of `inputs` put where the kernel worker reads them (host memory: the inbox;
// device memory: the IPC buffer); per tensor, where its storage is ([offset, bytes]) or null.
json KernelProcess::stage(const Values& inputs) {
  prefetched_.reset();  // (the buffer is written over)
  const std::vector<at::Tensor> ts = wire::tensors_in(inputs);
  std::map<const void*, std::pair<bool, uint64_t>> placed;  // storage -> (on the device, offset)
  uint64_t host = 0, device = 0;
  auto storage_of = [](const at::Tensor& t) { return t.defined() && t.has_storage() && t.storage().nbytes(); };
  for (const at::Tensor& t : ts)
    if (storage_of(t) && !placed.count(t.storage().unsafeGetStorageImpl())) {
      uint64_t& used = t.is_cpu() ? host : device;
      placed[t.storage().unsafeGetStorageImpl()] = {!t.is_cpu(), used};
      used += (t.storage().nbytes() + 511) / 512 * 512;
    }
  char* box = host ? inbox(host) : inbox_;
  if (device) ensure_buffer(device);
  json at = json::array();
  std::set<const void*> copied;
  for (const at::Tensor& t : ts) {
    if (!storage_of(t)) {
      at.push_back(nullptr);
      continue;
    }
    const auto [on_device, offset] = placed[t.storage().unsafeGetStorageImpl()];
    const uint64_t n = t.storage().nbytes();
    at.push_back({offset, n});
    if (!copied.insert(t.storage().unsafeGetStorageImpl()).second) continue;
    if (!on_device) {
      std::memcpy(box + offset, t.storage().data(), n);
      continue;
    }
    at::from_blob(static_cast<char*>(buffer_.ptr) + offset, {static_cast<int64_t>(n)},
                  at::TensorOptions().dtype(at::kByte).device(device_))
        .copy_(at::from_blob(t.storage().mutable_data(), {static_cast<int64_t>(n)},
                             at::TensorOptions().dtype(at::kByte).device(t.device())));
  }
  if (device) synchronize(device_);
  return {{"at", at}, {"inbox", inbox_bytes_}};
}

int64_t KernelProcess::prepare(const Values& inputs) {
  Spent spent(phase::kTransfer);
  const int64_t id = next_id_++;
  std::map<const void*, int64_t> sids;
  const json values = wire::encode(inputs, [&](const at::Tensor& t) {
    json j = wire::meta_json(wire::meta_of(t));
    if (t.defined()) {
      j["address"] = 0;
      if (t.has_storage()) j["sid"] = sids.emplace(t.storage().unsafeGetStorageImpl(), sids.size()).first->second;
    }
    return j;
  });
  pending_[id] = {{"values", values}, {"fill", stage(inputs)}};  // (made and filled with the set's first request)
  return id;
}

void KernelProcess::refill(int64_t id, const Values& inputs) {
  Spent spent(phase::kTransfer);
  pending_[id] = {{"fill", stage(inputs)}};  // (into the set's arguments as they are now, with its next request)
}

// A request about argument set `id`, with what is pending for the set (its making, its filling).
json KernelProcess::about(int64_t id, json request) {
  request["id"] = id;
  if (auto it = pending_.find(id); it != pending_.end()) {
    request.update(it->second);
    pending_.erase(it);
  }
  return request;
}

std::string KernelProcess::sample(const json& returned) {
  samples_.clear();
  words_.clear();
  if (!returned.is_object()) return "";
  const json spans = returned.value("spans", json::array());
  for (const json& w : returned.value("words", json::array()))
    if (w.is_array() && w.size() == 2 && w[0].is_number_unsigned() && w[1].is_number_unsigned())
      words_.emplace_back(w[0].get<uint64_t>(), w[1].get<uint64_t>());
  if (!spans.is_array() || spans.empty()) return "";
  std::mt19937_64 random(seed_++);
  uint64_t total = 0;
  for (const auto& s : spans) total += s.at(1).get<uint64_t>();
  if (total == 0) return "";
  std::vector<iovec> local, remote;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(64, (total + 7) / 8));
  samples_.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    uint64_t pick = random() % total;
    for (const auto& s : spans) {
      const uint64_t len = s.at(1);
      if (pick >= len) {
        pick -= len;
        continue;
      }
      const uint64_t at = s.at(0).get<uint64_t>() + pick;
      const size_t bytes = static_cast<size_t>(std::min<uint64_t>(8, len - pick));
      samples_.push_back({at, std::vector<unsigned char>(bytes)});
      break;
    }
  }
  for (auto& [at, bytes] : samples_) {
    local.push_back({bytes.data(), bytes.size()});
    remote.push_back({reinterpret_cast<void*>(at), bytes.size()});
  }
  const ssize_t got = ::process_vm_readv(pid_, local.data(), local.size(), remote.data(), remote.size(), 0);
  if (got < 0) {
    samples_.clear();
    return std::string("the kernel's results could not be read as it returned (") + std::strerror(errno) +
           "): results must be plain memory of its process";
  }
  return absent_pages(pid_, spans);
}

// Placed::kInBuffer: device groups are views of the shared buffer where the kernel's process packed
// them, not copies: valid until the buffer is next written (the next request), for a comparison made at
// once. Placed::kArgsInBuffer: so are the groups that hold no result (a timed run's arguments, read
// for mutation and aliasing within the pair): a copy of them was one more copy of a case's values in
// this process, which shares the device with the kernel's.
RemoteRun KernelProcess::replicas(int64_t id, int64_t run, const json* described, bool results_only, Placed placed) {
  Spent spent(phase::kTransfer);
  const bool pack = !device_.is_cpu();
  json request = {{"cmd", "describe"}, {"id", id}, {"pack", pack}, {"run", run}};
  if (results_only) request["results_only"] = true;
  json d = described && described->is_object() ? *described : ask(request);
  if (d.contains("need")) {
    ensure_buffer(d["need"].get<uint64_t>());
    d = ask(request);
  }
  throw_kernel_exception(d);
  std::vector<wire::TensorMeta> metas;
  std::vector<std::optional<uint64_t>> at;
  RemoteRun r;
  r.id = id;
  r.run = run;
  try {
    for (const json& j : d.at("tensors")) {
      metas.push_back(wire::meta_from(j));
      at.push_back(j.contains("at") ? std::optional<uint64_t>(j["at"].get<uint64_t>()) : std::nullopt);
      if (std::string why = layout_problem(metas.back()); !why.empty()) gone("it described " + why);
      if (!metas.back().device.is_cpu() && metas.back().device.type() != device_.type())
        gone("it described a tensor on " + metas.back().device.str());
    }
  } catch (const std::exception& e) {
    gone(std::string("its description of the values was malformed: ") + e.what());
  }
  std::vector<Group> groups = groups_of(metas);
  // Per group: copied here, not left in the buffer (kArgsInBuffer: the groups that hold a result).
  std::vector<bool> copy(groups.size(), placed == Placed::kCopies);
  if (placed == Placed::kArgsInBuffer) {
    try {
      for (const size_t k : wire::tensor_refs(d.at("results")))
        if (k < metas.size() && metas[k].defined)
          if (const Group* g = group_of(groups, metas[k])) copy[g - groups.data()] = true;
    } catch (const std::exception& e) {
      gone(std::string("its description of the values was malformed: ") + e.what());
    }
  }
  uint64_t total = 0;
  for (const auto& g : groups) total += g.hi - g.lo;
  if (total > read_limit_) gone("it described " + std::to_string(total) + " bytes of values, more than the case can hold");
  r.storage_bytes = total;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    // (host groups zeroed: a read that fails part way leaves no stale bytes; device groups are copied whole)
    const auto bytes = at::TensorOptions().dtype(at::kByte);
    if (g.device.is_cpu()) g.bytes = at::zeros({static_cast<int64_t>(g.hi - g.lo)}, bytes);
    bool copied = false;
    if (g.device.is_cpu()) {
      if (std::string why = read_remote(pid_, g.lo, g.bytes.data_ptr(), g.hi - g.lo); !why.empty() && r.escaped.empty())
        r.escaped = "the kernel's results or arguments are not plain memory of its process: " + why;
      continue;
    }
    for (size_t k = 0; k < metas.size(); ++k)  // (any member's place in the buffer gives the group's)
      if (at[k] && metas[k].device.type() == g.device.type() && metas[k].address >= g.lo && metas[k].address < g.hi) {
        const uint64_t from = *at[k] - (metas[k].address - g.lo);
        if (!buffer_.ptr || from + (g.hi - g.lo) > buffer_.bytes) gone("it packed its values outside the buffer");
        const at::Tensor packed = at::from_blob(static_cast<char*>(buffer_.ptr) + from,
                                                {static_cast<int64_t>(g.hi - g.lo)},
                                                at::TensorOptions().dtype(at::kByte).device(device_));
        g.bytes = copy[gi] ? packed.clone() : packed;
        copied = true;
        break;
      }
    if (!copied)  // (no member placed in the buffer: zeros)
      g.bytes = at::zeros({static_cast<int64_t>(g.hi - g.lo)}, bytes.device(device_));
  }
  std::vector<at::Tensor> local;
  for (const auto& m : metas) local.push_back(local_tensor(m, groups));
  auto by_index = [&](const json& j) -> at::Tensor {
    const size_t k = j.get<size_t>();
    if (k >= local.size()) throw std::runtime_error("a tensor index out of range");
    return local[k];
  };
  try {
    r.args = wire::decode(d.at("args"), by_index);
    const size_t arg_tensors = wire::tensors_in(r.args).size();
    r.called.results = wire::decode(d.at("results"), by_index);
    r.arg_ranges = ranges_of(local, metas, 0, arg_tensors);
    size_t k = arg_tensors;
    for (const auto& v : r.called.results) {
      const size_t n = wire::tensors_in({v}).size();
      r.result_ranges.push_back(ranges_of(local, metas, k, n));
      k += n;
    }
  } catch (const std::exception& e) {
    gone(std::string("its description of the values was malformed: ") + e.what());
  }
  if (!device_.is_cpu()) synchronize(device_);
  // (results of the CPU, read at random places as the call returned: the same bytes now?)
  for (const auto& [address, bytes] : samples_) {
    for (const auto& g : groups) {
      if (!g.device.is_cpu() || address < g.lo || address + bytes.size() > g.hi) continue;
      if (std::memcmp(static_cast<const char*>(g.bytes.data_ptr()) + (address - g.lo), bytes.data(), bytes.size()) &&
          r.escaped.empty())
        r.escaped = "the kernel's results changed after it returned (read at random places as it returned, and again "
                    "afterwards, from outside its process): work that escaped the call, or memory that computes "
                    "itself when read";
    }
  }
  for (const auto& [address, value] : words_) {  // (read by the kernel's process itself: the second line)
    for (const auto& g : groups) {
      if (!g.device.is_cpu() || address < g.lo || address + 8 > g.hi) continue;
      if (std::memcmp(static_cast<const char*>(g.bytes.data_ptr()) + (address - g.lo), &value, 8) && r.escaped.empty())
        r.escaped = "the kernel's results changed after it returned (its process read them as it returned): work "
                    "that escaped the call, e.g. on a thread of its own, was still writing them";
    }
  }
  samples_.clear();
  words_.clear();
  std::vector<Range> cpu_results;
  for (size_t v = 0; v < r.called.results.size(); ++v)
    for (const at::Tensor& t : wire::tensors_in({r.called.results[v]}))
      if (t.defined() && t.is_cpu())
        for (const Range& range : r.result_ranges[v]) cpu_results.push_back(range);
  bool shared = false;
  if (std::string why = device_.is_cpu() ? not_plain(pid_, cpu_results, &shared) : ""; !why.empty()) {
    const std::string plain = "the kernel's results must be plain memory of its process (private, anonymous, "
                              "readable and writable): " + why;
    if (shared) r.shared = plain + " (shared memory: a later result may be mapped over it)";
    else if (r.escaped.empty())
      r.escaped = plain;
  }
  return r;
}

RemoteRun KernelProcess::finish(int64_t id, const json& reply, const std::string& sampled, Placed placed) {
  if (!reply.contains("run") || !reply["run"].is_number_integer()) gone("it did not say which run it made");
  RemoteRun r = replicas(id, reply["run"].get<int64_t>(), reply.contains("described") ? &reply["described"] : nullptr,
                         false, placed);
  if (!sampled.empty() && r.escaped.empty()) r.escaped = sampled;
  r.called.native_call = reply.value("native_call", "");
  r.called.allowed_aten = reply.value("allowed_aten", std::vector<std::string>{});
  r.out_of_bounds = reply.value("out_of_bounds", "");
  return r;
}

RemoteRun KernelProcess::run(int64_t id, uint8_t poison) {
  json reply;
  {
    Spent spent(phase::kKernel);
    reply = ask(about(id, {{"cmd", "run"}, {"poison", poison}, {"seed", seed_++},
                           {"pack", !device_.is_cpu()}}));
  }
  throw_kernel_exception(reply);
  const std::string sampled = sample(reply.value("returned", json()));
  return finish(id, reply, sampled);
}

RemoteRun KernelProcess::run_timed(int64_t id, const RemoteRun* reread_after) {
  if (!device_.is_cpu()) {
    json reply;
    {
      Spent spent(phase::kTimed);
      json request = {{"cmd", "timed"}, {"pack", true}};
      if (reread_after)
        request["also"] = {
            {"id", reread_after->id}, {"run", reread_after->run}, {"pack", true}, {"results_only", true}};
      reply = ask(about(id, std::move(request)));
    }
    throw_kernel_exception(reply);
    if (reread_after && reply.contains("also"))  // (ask() dropped any earlier one)
      prefetched_.emplace(std::make_pair(reread_after->id, reread_after->run), std::move(reply["also"]));
    RemoteRun r = finish(id, reply, "", Placed::kArgsInBuffer);
    r.us = reply.value("device_us", 0.0);
    r.events_us = reply.value("events_us", 0.0);
    r.activities = reply.value("activities", 0);
    r.cuda.escaping = reply.value("escaping", "");
    r.cuda.tampering = reply.value("tampering", "");
    r.cuda.library = reply.value("library", "");
    r.cuda.blinded = reply.value("blinded", "");
    return r;
  }
  HostRun h = host_run(id, false);
  throw_kernel_exception(h.reply);
  RemoteRun r = finish(id, h.reply, h.sampled);
  if (!h.done.contains("us") || !h.done["us"].is_number()) gone("it gave no time for a run that returned");
  r.us = h.done["us"].get<double>();
  r.outside = h.outside;
  r.outside->reported_us = r.us;
  return r;
}

KernelProcess::HostRun KernelProcess::host_run(int64_t id, bool dry) {
  {
    Spent spent(phase::kEvict);
    throw_kernel_exception(ask(about(id, {{"cmd", "ready"}})));
  }
  HostRun h;
  ThreadTimes kernel0, kernel1, replied, self0, self1;
  uint64_t w0, w1;
  {
    Spent spent(phase::kTimed);
    wait_off_cpu(pid_);  // (its count is up to date only once it waits for the request)
    kernel0 = thread_times(pid_);
    self0 = thread_times("/proc/thread-self/schedstat");
    w0 = raw_monotonic_ns();
    note_phase(true);
    try {
      wire::send(fd_, {{"cmd", "go"}, {"id", id}, {"seed", seed_++}, {"dry", dry}});
    } catch (const wire::Closed& e) {
      gone(e.what());
    }
    h.done = receive();
    w1 = raw_monotonic_ns();
    self1 = thread_times("/proc/thread-self/schedstat");
    // (its waits for a CPU up to its reply, each counted as it got the CPU back: after the reply it may
    // wait again behind its own process's threads, e.g. OpenMP's spinning on after a parallel relu, which
    // a run of nothing does not start; counted, that accused native of 2 ms a run under a parallel ctest)
    replied = thread_times(pid_);
  }
  {
    // (the result reads as it returned, and the outside clock's second reading: checks of the run)
    Spent spent(phase::kIntegrity);
    h.sampled = sample(h.done.value("returned", json()));  // (at once: the first line's reads)
    wait_off_cpu(pid_);
    kernel1 = thread_times(pid_);
  }
  {
    Spent spent(phase::kTransfer);  // (what it returned, described)
    h.reply = ask({{"cmd", "more"}, {"id", id}, {"pack", !device_.is_cpu()}});
  }
  const double us = h.done.value("us", json()).is_number() ? h.done["us"].get<double>() : 0.0;
  // The wall window, less the time either thread waited for a CPU (a busy machine's noise, not the call's).
  const bool known = kernel0.cpu_us >= 0 && kernel1.cpu_us >= 0;
  double wall = static_cast<double>(w1 - w0) / 1000.0;
  if (known && self0.waited_us >= 0 && self1.waited_us >= 0)
    wall -= (kernel1.waited_us - kernel0.waited_us) + (self1.waited_us - self0.waited_us);
  // The calling thread's time on a CPU and waiting for one: a process's clock keeps running while its
  // thread waits for a CPU, so CPU time alone falls short of an honest time on a busy machine by the waits
  // inside the timed call, and hid a clock wound back by 120 us a run of 200 under a parallel ctest on the
  // 2-core VM (2026-12-07). Both sides count those waits now; a thread that sleeps counts neither.
  double thread = -1;
  if (known)
    thread = kernel1.cpu_us - kernel0.cpu_us +
             (kernel0.waited_us >= 0 && replied.waited_us >= 0 ? replied.waited_us - kernel0.waited_us : 0.0);
  h.outside = {us, wall, thread};
  return h;
}

RemoteRun KernelProcess::reread(const RemoteRun& earlier, bool in_buffer) {
  if (prefetched_ && prefetched_->first == std::make_pair(earlier.id, earlier.run)) {
    const json described = std::move(prefetched_->second);
    prefetched_.reset();
    return replicas(earlier.id, earlier.run, &described, true, in_buffer ? Placed::kInBuffer : Placed::kCopies);
  }
  return replicas(earlier.id, earlier.run, nullptr, true, in_buffer ? Placed::kInBuffer : Placed::kCopies);
}

bool KernelProcess::results_unchanged(const RemoteRun& earlier) {
  const RemoteRun now = reread(earlier, true);
  Spent spent(phase::kIntegrity);
  return same_bytes(earlier.called.results, now.called.results);
}

// Whether every thread of process `pid` is stopped (or gone): a SIGSTOP stops each thread as it next
// runs, and on a busy machine a thread waiting for a core may wait a time slice or more (a kernel's
// spinning threads did: 0.1-6.5 ms on the 2-core VM). A child of this process says so in one waitid();
// any other is read in /proc.
namespace {
bool all_stopped(pid_t pid) {
  siginfo_t si{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &si, WSTOPPED | WEXITED | WNOHANG | WNOWAIT) == 0)
    return si.si_pid == pid;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return true;
  bool stopped = true;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;  // (gone meanwhile)
    const char state = stat[close + 2];
    if (state != 'T' && state != 't' && state != 'Z' && state != 'X') {
      stopped = false;
      break;
    }
  }
  ::closedir(d);
  return stopped;
}
}  // namespace

// Every process of the kernel's stopped, until native's timed run is over: a thread of theirs left
// running would share the cores with native. Waits until each has stopped, 20 ms at most (a kernel
// spinning on every core between its calls took 0.1-6.6 ms to stop on the 2-core VM, and native's median
// read 2-6 times its own while it did not wait).
void KernelProcess::pause() {
  if (pid_ <= 0) return;
  paused_ = living_descendants(pid_);
  paused_.push_back(pid_);
  for (pid_t p : paused_) ::kill(p, SIGSTOP);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  for (pid_t p : paused_)
    while (!all_stopped(p) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

void KernelProcess::resume() {
  for (pid_t p : paused_) ::kill(p, SIGCONT);
  paused_.clear();
}

void KernelProcess::release(int64_t id) {
  pending_.erase(id);
  if (fd_ >= 0) to_free_.push_back(id);
}

std::vector<RemoteFinding> KernelProcess::end_case() {
  std::vector<RemoteFinding> out;
  pending_.clear();
  const json r = ask({{"cmd", "case_end"}});
  if (r.contains("findings"))
    for (const auto& f : r["findings"]) out.push_back({f.at("flag"), f.at("why")});
  std::vector<pid_t> left = living_descendants(pid_);
  for (pid_t p : stray_children({pid_})) left.push_back(p);
  if (!left.empty()) {
    out.push_back({"escaping-work", "the kernel's process left " + std::to_string(left.size()) +
                                        " process(es) running after the case (they were killed, and the worker with "
                                        "them)"});
    stop();
  }
  return out;
}

void KernelProcess::release_memory(uint64_t case_bytes) {
  if (device_.is_cpu() || !alive() || (case_bytes < kLargeCase && buffer_.bytes < kLargeCase)) return;
  const json r = ask({{"cmd", "release"}});  // (the kernel's process closes its mapping of the buffer first)
  ipc_close(&buffer_);
  if (r.contains("error")) gone("it could not give back its device memory: " + r["error"].get<std::string>());
}

verify::OutsideRun KernelProcess::dry_run(int64_t id) {
  const HostRun h = host_run(id, true);
  throw_kernel_exception(h.reply);
  samples_.clear(), words_.clear();
  return h.outside;
}

bool same_bytes(const Values& a, const Values& b) {
  const std::vector<at::Tensor> x = wire::tensors_in(a), y = wire::tensors_in(b);
  if (x.size() != y.size()) return false;
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;  // (compared at once: one read for all of them)
  for (size_t k = 0; k < x.size(); ++k) {
    if (x[k].defined() != y[k].defined()) return false;
    if (!x[k].defined() || x[k].numel() == 0) continue;
    if (x[k].sizes() != y[k].sizes() || x[k].dtype() != y[k].dtype()) return false;
    // Elements as integers of their size (a copy of a bool tensor makes every true 1; of a float, NaN
    // payloads may change), one after another.
    auto bytes = [](at::Tensor t) {
      if (t.is_complex()) t = at::view_as_real(t);
      static const c10::ScalarType by_size[] = {at::kByte, at::kByte, at::kShort, at::kByte, at::kInt,
                                               at::kByte, at::kByte, at::kByte, at::kLong};
      const size_t size = t.element_size();
      if (size < sizeof by_size / sizeof by_size[0] && by_size[size] != at::kByte) t = t.view(by_size[size]);
      else if (size == 1)
        t = t.view(at::kByte);
      return t.reshape({-1}).contiguous();  // (on its device: at::equal compares there)
    };
    if (x[k].device() != y[k].device()) return false;
    pairs.emplace_back(bytes(x[k]), bytes(y[k]));
  }
  return verify::all_equal(pairs);
}

bool reuses(const RemoteRun& earlier, const RemoteRun& later, size_t outputs) {
  for (size_t v = 0; v < outputs && v < later.result_ranges.size(); ++v)
    for (const Range& b : later.result_ranges[v]) {
      if (std::any_of(later.arg_ranges.begin(), later.arg_ranges.end(), [&](const Range& e) { return overlaps(b, e); }))
        continue;
      for (size_t u = 0; u < outputs && u < earlier.result_ranges.size(); ++u)
        for (const Range& a : earlier.result_ranges[u])
          if (overlaps(a, b)) return true;
    }
  return false;
}

}  // namespace bb::replay
