#include "replay/workers/isolation.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace bb::replay {
namespace {

constexpr unsigned kAtRecursive = 0x8000;         // AT_RECURSIVE
constexpr uint64_t kMountAttrRdonly = 0x1;        // MOUNT_ATTR_RDONLY
constexpr unsigned kCloseRangeCloexec = 1u << 2;  // CLOSE_RANGE_CLOEXEC
struct MountAttr {                                // struct mount_attr (linux/mount.h)
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};
const char* const kDevNames[] = {"null", "zero", "full", "random", "urandom"};

std::atomic<bool> g_force_remount{false};

// Everything the child needs, built before the clone: between clone and execve the child makes raw
// system calls only (no allocation, no locks: another thread of the caller may hold them).
struct Plan {
  bool namespaces = false, force_remount = false;
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
  std::string uid_map, gid_map, cwd;
  int last_cap = 40;
  std::vector<std::string> mounts;                       // mount points, for the remount fallback
  std::vector<std::string> writable;                     // canonical paths
  std::vector<std::vector<std::string>> writable_chain;  // the folders down to each, to create if missing
  std::vector<int> writable_fd;                          // filled in by the child
  std::vector<std::string> dev_src, dev_dst;             // host /dev entries; their place in the staged /dev
  std::vector<char> dev_dir;
  std::vector<std::string> proc_entries;  // /proc's entries that belong to no process (sys, irq, ...)
  std::vector<std::pair<int, int>> fds;
  std::vector<int> fd_tmp;  // filled in by the child
  std::vector<int> keep;    // the child's fd numbers, sorted, unique
  int high = 3;             // above every fd number of `fds` and of the status pipe
  int status = -1;          // the status pipe's write end
  long nofile = 1024;
  sigset_t mask{};  // the caller's signal mask, set back before execve
};

// ---- the child: raw system calls only ----

size_t put_text(char* out, size_t room, const char* s) {
  size_t n = 0;
  while (s[n] && n < room) out[n] = s[n], ++n;
  return n;
}

size_t put_int(char* out, long v) {
  char digits[24];
  size_t n = 0;
  do digits[n++] = char('0' + v % 10), v /= 10;
  while (v > 0);
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

// Reports "<step>[ <detail>]: <errno>" on the status pipe and exits.
[[noreturn]] void fail(const Plan& p, const char* step, const char* detail = nullptr) {
  const int e = errno;
  char buf[512];
  size_t n = put_text(buf, 200, step);
  if (detail) n += put_text(buf + n, 1, " "), n += put_text(buf + n, 280, detail);
  n += put_text(buf + n, 2, ": ");
  n += put_int(buf + n, e);
  (void)!write(p.status, buf, n);
  _exit(127);
}

bool write_file(const char* path, const char* text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t len = ssize_t(strlen(text));
  const bool ok = write(fd, text, size_t(len)) == len;
  const int e = errno;
  close(fd);
  errno = e;
  return ok;
}

void map_ids(const Plan& p) {
  if (!write_file("/proc/self/setgroups", "deny") && errno != ENOENT) fail(p, "write /proc/self/setgroups");
  if (!write_file("/proc/self/uid_map", p.uid_map.c_str())) fail(p, "write /proc/self/uid_map");
  if (!write_file("/proc/self/gid_map", p.gid_map.c_str())) fail(p, "write /proc/self/gid_map");
}

// The flags a bind remount of `path` must repeat (they are locked in a less privileged namespace).
bool kept_flags(const char* path, unsigned long* flags) {
  struct statfs st;
  if (statfs(path, &st) != 0) return false;
  const unsigned long f = st.f_flags;
  unsigned long out = 0;
  if (f & ST_RDONLY) out |= MS_RDONLY;
  if (f & ST_NOSUID) out |= MS_NOSUID;
  if (f & ST_NODEV) out |= MS_NODEV;
  if (f & ST_NOEXEC) out |= MS_NOEXEC;
  if (f & ST_NODIRATIME) out |= MS_NODIRATIME;
  out |= (f & ST_NOATIME) ? MS_NOATIME : (f & ST_RELATIME) ? MS_RELATIME : MS_STRICTATIME;
  *flags = out;
  return true;
}

bool remount(const char* path, bool rdonly) {
  unsigned long f = 0;
  if (!kept_flags(path, &f)) return false;
  f = rdonly ? (f | MS_RDONLY) : (f & ~MS_RDONLY);
  return mount(nullptr, path, nullptr, MS_REMOUNT | MS_BIND | f, nullptr) == 0;
}

void make_readonly(const Plan& p) {
  if (!p.force_remount) {
    MountAttr attr{kMountAttrRdonly, 0, 0, 0};
    if (syscall(SYS_mount_setattr, AT_FDCWD, "/", kAtRecursive, &attr, sizeof attr) == 0) return;
    if (errno != ENOSYS) fail(p, "mount_setattr read-only /");
  }
  for (const auto& m : p.mounts)
    if (!remount(m.c_str(), true) && errno != ENOENT) fail(p, "remount read-only", m.c_str());
}

void open_writable(Plan& p) {
  for (size_t i = 0; i < p.writable.size(); ++i) {
    p.writable_fd[i] = open(p.writable[i].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (p.writable_fd[i] < 0) fail(p, "open", p.writable[i].c_str());
  }
}

// A /dev of null, zero, full, random, urandom and nvidia*, staged on a tmpfs over /tmp, then moved.
void private_dev(const Plan& p) {
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID, "mode=755,size=64k") != 0) fail(p, "mount tmpfs for /dev");
  if (mkdir("/tmp/shm", 01777) != 0) fail(p, "mkdir /dev/shm");
  for (size_t i = 0; i < p.dev_src.size(); ++i) {
    const char* dst = p.dev_dst[i].c_str();
    const int fd = p.dev_dir[i] ? mkdir(dst, 0755) : open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) fail(p, "create bind target", dst);
    if (!p.dev_dir[i]) close(fd);
    if (mount(p.dev_src[i].c_str(), dst, nullptr, MS_BIND | (p.dev_dir[i] ? MS_REC : 0), nullptr) != 0)
      fail(p, "bind", p.dev_src[i].c_str());
  }
  if (mount("/tmp", "/dev", nullptr, MS_MOVE, nullptr) != 0) fail(p, "move the new /dev");
  if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) fail(p, "mount /dev/shm");
  if (!remount("/dev", true)) fail(p, "remount /dev read-only");
}

void bind_writable(Plan& p) {
  char src[40];
  for (size_t i = 0; i < p.writable.size(); ++i) {
    const char* dst = p.writable[i].c_str();
    if (access(dst, F_OK) != 0)  // under the fresh /tmp or /dev/shm
      for (const auto& d : p.writable_chain[i])
        if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) fail(p, "mkdir", d.c_str());
    const size_t n = put_text(src, 20, "/proc/self/fd/");
    src[n + put_int(src + n, p.writable_fd[i])] = '\0';
    if (mount(src, dst, nullptr, MS_BIND | MS_REC, nullptr) != 0) fail(p, "bind", dst);
    if (!remount(dst, false)) fail(p, "remount read-write", dst);
    close(p.writable_fd[i]);
  }
}

// A fresh /proc stays writable (CUDA names its threads through /proc/self/task/*/comm: error 304
// without), but what belongs to no process is bound read-only over itself: a child of uid 0 could
// otherwise write sysctls, sysrq-trigger, irq affinities.
void protect_proc(const Plan& p) {
  for (const auto& e : p.proc_entries) {
    if (mount(e.c_str(), e.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      if (errno == ENOENT) continue;
      fail(p, "bind", e.c_str());
    }
    if (!remount(e.c_str(), true)) fail(p, "remount read-only", e.c_str());
  }
}

// A second user and mount namespace: the mounts copied into it are locked (read-only stays so, what
// hides the host's /dev stays mounted). The host's /proc, where kept, is read-only from here on: its
// /proc/<pid>/mem of our own processes would be open to the child.
void lock_mounts(const Plan& p, bool fresh_proc) {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) fail(p, "unshare(CLONE_NEWUSER|CLONE_NEWNS)");
  map_ids(p);
  if (!fresh_proc && !remount("/proc", true)) fail(p, "remount /proc read-only");
}

// `lenient`: a caller without CAP_SETPCAP (not root: it has no capability to lose) may not drop the
// bounding set; that is no failure.
void drop_privileges(const Plan& p, bool lenient = false) {
  for (int c = 0; c <= p.last_cap; ++c)
    if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL && !(lenient && errno == EPERM))
      fail(p, "PR_CAPBSET_DROP");
  (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(p, "PR_SET_NO_NEW_PRIVS");
}

// SIGKILL when the spawning thread ends; exits if the caller is gone already (nobody reads the
// status pipe any more: getppid() says nothing inside a PID namespace).
void watch_parent(const Plan& p) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail(p, "PR_SET_PDEATHSIG");
  struct pollfd pf = {p.status, 0, 0};
  if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLERR)) _exit(127);
}

void setup_namespaces(Plan& p) {
  map_ids(p);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail(p, "make / private");
  make_readonly(p);
  open_writable(p);
  private_dev(p);  // (the host's /tmp stays, read-only: backends and caches may be there; /dev/shm is the scratch)
  bind_writable(p);
  const bool fresh_proc = mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0;
  if (!fresh_proc && !remount("/proc", false)) fail(p, "remount the old /proc read-write");  // for map_ids
  protect_proc(p);
  if (!p.cwd.empty()) (void)!chdir(p.cwd.c_str());  // onto a writable bind, if it is in one
  lock_mounts(p, fresh_proc);
  drop_privileges(p);
}

void close_span(unsigned lo, unsigned hi, unsigned flags, long nofile) {
  if (lo > hi || syscall(SYS_close_range, lo, hi, flags) == 0) return;
  const long end = std::min<long>(hi, std::min<long>(nofile, 1L << 20) - 1);
  for (long fd = lo; fd <= end; ++fd) (void)(flags ? fcntl(int(fd), F_SETFD, FD_CLOEXEC) : close(int(fd)));
}

// dup2s through copies above every number in play (a source may be another's target), closes every
// other fd below `high` and marks those above close-on-exec (the status pipe lives until execve).
void set_fds(Plan& p) {
  for (size_t i = 0; i < p.fds.size(); ++i)
    if ((p.fd_tmp[i] = fcntl(p.fds[i].first, F_DUPFD_CLOEXEC, p.high)) < 0) fail(p, "dup fd");
  for (size_t i = 0; i < p.fds.size(); ++i)
    if (dup2(p.fd_tmp[i], p.fds[i].second) < 0) fail(p, "dup2");
  unsigned lo = 0;
  for (int k : p.keep) {
    if (unsigned(k) > lo) close_span(lo, unsigned(k) - 1, 0, p.nofile);
    lo = unsigned(k) + 1;
  }
  if (unsigned(p.high) > lo) close_span(lo, unsigned(p.high) - 1, 0, p.nofile);
  close_span(unsigned(p.high), ~0u, kCloseRangeCloexec, p.nofile);
}

void default_signals() {
  for (int s = 1; s < NSIG; ++s) {
    struct sigaction sa;
    if (s == SIGKILL || s == SIGSTOP || sigaction(s, nullptr, &sa) != 0) continue;
    if (sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) continue;
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = 0;
    (void)sigaction(s, &sa, nullptr);
  }
}

[[noreturn]] void child_main(Plan& p) {
  default_signals();
  const int moved = fcntl(p.status, F_DUPFD_CLOEXEC, p.high);
  if (moved < 0) fail(p, "move the status pipe");
  p.status = moved;  // at or above `high`: kept by set_fds until execve
  watch_parent(p);
  if (p.namespaces) setup_namespaces(p);
  else
    drop_privileges(p, true);  // (root without its capabilities: no ptrace of the parent, no raw devices)
  watch_parent(p);
  set_fds(p);
  sigprocmask(SIG_SETMASK, &p.mask, nullptr);
  execve(p.argv[0], p.argv.data(), p.envp.data());
  fail(p, "execve", p.argv[0]);
}

// ---- the parent ----

std::string unescape_octal(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += char(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> mount_points() {
  std::ifstream in("/proc/self/mountinfo");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (fields >> id >> parent >> dev >> root >> point) out.push_back(unescape_octal(point));
  }
  return out;
}

std::vector<std::string> dir_names(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (const dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
  closedir(d);
  return out;
}

void add_dev_entries(Plan& p) {
  std::vector<std::string> names(std::begin(kDevNames), std::end(kDevNames));
  for (const auto& n : dir_names("/dev"))
    if (n.rfind("nvidia", 0) == 0) names.push_back(n);
  for (const auto& n : names) {
    struct stat st;
    const std::string src = "/dev/" + n;
    if (stat(src.c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISDIR(st.st_mode))) continue;
    p.dev_src.push_back(src);
    p.dev_dst.push_back("/tmp/" + n);
    p.dev_dir.push_back(S_ISDIR(st.st_mode));
  }
}

void add_proc_entries(Plan& p) {
  for (const auto& n : dir_names("/proc")) {
    struct stat st;
    const std::string path = "/proc/" + n;
    if (std::isdigit(static_cast<unsigned char>(n[0])) || lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    p.proc_entries.push_back(path);
  }
}

void add_writable(Plan& p, const std::vector<std::string>& dirs) {
  for (const auto& w : dirs) {
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(w.c_str(), real) || stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
      throw std::runtime_error("spawn_isolated: writable '" + w + "' is not an existing directory");
    p.writable.emplace_back(real);
    std::vector<std::string> chain;
    for (size_t at = 1; (at = p.writable.back().find('/', at)) != std::string::npos; ++at)
      chain.push_back(p.writable.back().substr(0, at));
    if (p.writable.back() != "/") chain.push_back(p.writable.back());
    p.writable_chain.push_back(chain);
  }
  p.writable_fd.assign(p.writable.size(), -1);
}

void add_fds(Plan& p, const std::vector<std::pair<int, int>>& fds) {
  for (const auto& [from, to] : fds) {
    if (from < 0 || to < 0 || fcntl(from, F_GETFD) < 0)
      throw std::runtime_error("spawn_isolated: bad fd pair (" + std::to_string(from) + ", " + std::to_string(to) + ")");
    p.keep.push_back(to);
    p.high = std::max({p.high, from + 1, to + 1});
  }
  std::sort(p.keep.begin(), p.keep.end());
  p.keep.erase(std::unique(p.keep.begin(), p.keep.end()), p.keep.end());
  p.fds = fds;
  p.fd_tmp.assign(fds.size(), -1);
}

int last_cap() {
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  int c = 40;
  return (in >> c) && c >= 0 && c < 64 ? c : 40;
}

void make_plan(Plan& p, const SpawnSpec& spec, bool namespaces) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/')
    throw std::runtime_error("spawn_isolated: argv[0] must be an absolute path");
  p.namespaces = namespaces;
  p.force_remount = g_force_remount;
  p.argv_s = spec.argv;
  p.env_s = spec.env;
  for (auto& a : p.argv_s) p.argv.push_back(a.data());
  for (auto& e : p.env_s) p.envp.push_back(e.data());
  p.argv.push_back(nullptr);
  p.envp.push_back(nullptr);
  add_fds(p, spec.fds);
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) p.nofile = long(rl.rlim_cur);
  if (!namespaces) return;
  add_writable(p, spec.writable);
  const std::string u = std::to_string(geteuid()), g = std::to_string(getegid());
  p.uid_map = u + " " + u + " 1";
  p.gid_map = g + " " + g + " 1";
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd)) p.cwd = cwd;
  p.last_cap = last_cap();
  p.mounts = mount_points();
  add_dev_entries(p);
  add_proc_entries(p);
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n > 0) out.append(buf, size_t(n));
    else if (errno != EINTR) break;
  }
  return out;
}

void wait_for(pid_t pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
}

// "<step>: <errno>" from the child, as "<step>: <strerror>".
std::string describe(const std::string& msg) {
  const size_t at = msg.rfind(": ");
  if (at == std::string::npos) return msg;
  return msg.substr(0, at) + ": " + std::strerror(std::atoi(msg.c_str() + at + 2));
}

// Clones and sets up the child; its pid, or -1 with `why` (the child is reaped then).
pid_t start(const SpawnSpec& spec, bool namespaces, std::string* why) {
  Plan p;
  make_plan(p, spec, namespaces);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    *why = std::string("pipe2: ") + std::strerror(errno);
    return -1;
  }
  p.status = pipefd[1];
  p.high = std::max({p.high, pipefd[0] + 1, pipefd[1] + 1});
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &p.mask);
  const long flags = (namespaces ? CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET : 0) | SIGCHLD;
  const long pid = syscall(SYS_clone, flags, 0, 0, 0, 0);
  if (pid == 0) child_main(p);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &p.mask, nullptr);
  close(pipefd[1]);
  if (pid < 0) {
    close(pipefd[0]);
    *why = std::string("clone: ") + std::strerror(clone_errno);
    return -1;
  }
  const std::string msg = read_all(pipefd[0]);
  close(pipefd[0]);
  if (msg.empty()) return pid_t(pid);
  wait_for(pid_t(pid));
  *why = describe(msg);
  return -1;
}

// ---- finding processes ----

// The state letter and parent pid of /proc/<pid>/stat; false when the process is gone.
bool read_stat(pid_t pid, char* state, pid_t* ppid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(in, s);
  const size_t close = s.rfind(')');
  if (close == std::string::npos || close + 2 >= s.size()) return false;
  std::istringstream rest(s.substr(close + 2));
  return bool(rest >> *state >> *ppid);
}

bool alive(pid_t pid) {
  char state = 0;
  pid_t ppid = 0;
  return read_stat(pid, &state, &ppid) && state != 'Z' && state != 'X';
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::ifstream in(path);
  std::vector<pid_t> out;
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

bool have_children_files() {
  static const bool have = access(("/proc/self/task/" + std::to_string(getpid()) + "/children").c_str(), R_OK) == 0;
  return have;
}

// Children of `pid`, zombies included: its threads' children files or, where the kernel has none,
// every process whose /proc/<pid>/stat names it as parent.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::string task = "/proc/" + std::to_string(pid) + "/task/";
  if (have_children_files()) {
    for (const auto& tid : dir_names(task))
      for (pid_t c : read_pids(task + tid + "/children")) out.push_back(c);
    return out;
  }
  for (const auto& name : dir_names("/proc")) {
    char state = 0;
    pid_t c = std::atoi(name.c_str()), ppid = 0;
    if (c > 0 && read_stat(c, &state, &ppid) && ppid == pid) out.push_back(c);
  }
  return out;
}

}  // namespace

void force_remount_fallback_for_tests(bool on) { g_force_remount = on; }

Spawned spawn_isolated(const SpawnSpec& spec) {
  Spawned out;
  std::string why;
  if (spec.mode != SpawnSpec::Mode::Subreaper) {
    if ((out.pid = start(spec, true, &why)) > 0) {
      out.isolation = "namespaces";
      return out;
    }
    if (spec.mode == SpawnSpec::Mode::Namespaces)
      throw std::runtime_error("spawn_isolated: namespaces refused: " + why);
    out.refused = why;
  }
  become_subreaper();
  if ((out.pid = start(spec, false, &why)) <= 0)
    throw std::runtime_error("spawn_isolated: cannot start " + spec.argv[0] + ": " + why);
  out.isolation = "subreaper";
  return out;
}

void become_subreaper() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
      throw std::runtime_error(std::string("PR_SET_CHILD_SUBREAPER: ") + std::strerror(errno));
  });
}

std::vector<pid_t> living_descendants(pid_t root) {
  std::vector<pid_t> out, todo{root};
  std::set<pid_t> seen{root};
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    for (pid_t c : children_of(pid)) {
      if (!seen.insert(c).second) continue;
      todo.push_back(c);
      if (alive(c)) out.push_back(c);
    }
  }
  return out;
}

std::vector<pid_t> stray_children(const std::set<pid_t>& known) {
  std::vector<pid_t> out;
  for (pid_t c : children_of(getpid()))
    if (!known.count(c) && alive(c)) out.push_back(c);
  return out;
}

int kill_strays(pid_t root, const std::set<pid_t>& known) {
  std::set<pid_t> killed;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    std::vector<pid_t> targets = living_descendants(root);
    for (pid_t stray : stray_children(known)) {
      const std::vector<pid_t> below = living_descendants(stray);
      targets.push_back(stray);
      targets.insert(targets.end(), below.begin(), below.end());
    }
    targets.erase(std::remove(targets.begin(), targets.end(), root), targets.end());
    if (targets.empty() || std::chrono::steady_clock::now() > deadline) break;
    bool fresh = false;
    for (pid_t pid : targets) fresh |= kill(pid, SIGKILL) == 0 && killed.insert(pid).second;
    if (!fresh) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // killed ones still dying
  }
  for (pid_t c : children_of(getpid()))
    if (c != root && !known.count(c) && (killed.count(c) || !alive(c))) wait_for(c);
  return int(killed.size());
}

}  // namespace bb::replay
