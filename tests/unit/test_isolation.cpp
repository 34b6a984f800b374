// bb_isolation: a worker started in namespaces (or under a child subreaper) cannot reach its parent,
// and whatever it detached is found and killed. This binary is also the probe it starts: with
// BB_ISOLATION_HELPER set, it reports what it sees from inside and exits before Catch2 runs.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "replay/workers/isolation.h"

using bb::replay::SpawnSpec;
using Mode = bb::replay::SpawnSpec::Mode;

namespace {

// ---- the probe (runs as the spawned child) ----

std::string env_or(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// "ok" or the errno number of a failed call.
std::string outcome(bool ok) { return ok ? "ok" : std::to_string(errno); }

std::string try_write(const std::string& path) {
  const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return outcome(false);
  const bool ok = write(fd, "hello", 5) == 5;
  close(fd);
  return outcome(ok);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

void probe_files(std::map<std::string, std::string>& r) {
  const std::string tag = env_or("BB_PROBE_TAG");
  r["ro_write"] = try_write(env_or("BB_PROBE_RO") + "/probe-" + tag);
  r["rw_write"] = try_write(env_or("BB_PROBE_RW") + "/probe");
  r["tmp_rw_write"] = try_write(env_or("BB_PROBE_TMP_RW") + "/probe");
  r["tmp_write"] = try_write("/tmp/bb-isolation-probe-" + tag);
  r["shm_write"] = try_write("/dev/shm/bb-isolation-probe");
  r["devnull_write"] = try_write("/dev/null");
  r["mknod_block"] = outcome(mknod("/dev/shm/blk", S_IFBLK | 0600, makedev(254, 0)) == 0);
  const int sysctl = open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC);  // opened, never written
  r["sysctl_open"] = outcome(sysctl >= 0);
  if (sysctl >= 0) close(sysctl);
  r["comm_write"] = try_write("/proc/self/task/" + std::to_string(getpid()) + "/comm");  // CUDA needs it
  if (access("/proc/sysrq-trigger", F_OK) == 0) {
    const int sysrq = open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC);  // opened, never written
    r["sysrq_open"] = outcome(sysrq >= 0);
    if (sysrq >= 0) close(sysrq);
  }
}

void probe_processes(std::map<std::string, std::string>& r) {
  char self[64] = {};
  r["proc_self"] = readlink("/proc/self", self, sizeof self - 1) > 0 ? self : "?";
  int pids = 0;
  for (const auto& n : names_in("/proc")) pids += std::all_of(n.begin(), n.end(), ::isdigit);
  r["proc_pids"] = std::to_string(pids);
  r["proc_has_parent"] = access(("/proc/" + env_or("BB_PROBE_PARENT", "0")).c_str(), F_OK) == 0 ? "yes" : "no";
  std::istringstream victims(env_or("BB_PROBE_KILL"));
  for (pid_t pid; victims >> pid;) r["kill_" + std::to_string(pid)] = outcome(kill(pid, SIGKILL) == 0);
  r["uid"] = std::to_string(getuid());
  r["gid"] = std::to_string(getgid());
  r["dev"] = joined(names_in("/dev"));
}

void probe_mounts(std::map<std::string, std::string>& r) {
  r["remount_root"] = outcome(mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND, nullptr) == 0);
  r["umount_dev"] = outcome(umount2("/dev", MNT_DETACH) == 0);
  r["nested_unshare"] = outcome(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0);
  if (r["nested_unshare"] != "ok") return;
  r["nested_remount_root"] = outcome(mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND, nullptr) == 0);
  r["nested_remount_proc"] = outcome(mount(nullptr, "/proc", nullptr, MS_REMOUNT | MS_BIND, nullptr) == 0);
  r["nested_umount_dev"] = outcome(umount2("/dev", MNT_DETACH) == 0);
}

// Open fds of this process but the one reading the folder, in order.
std::string open_fds() {
  std::vector<int> fds;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return "?";
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.' && std::atoi(e->d_name) != dirfd(d)) fds.push_back(std::atoi(e->d_name));
  closedir(d);
  std::sort(fds.begin(), fds.end());
  std::string out;
  for (int fd : fds) out += (out.empty() ? "" : " ") + std::to_string(fd);
  return out;
}

// By hand: BB_ISOLATION_HELPER=spawn bb_test_isolation /abs/program args... runs it isolated (Auto
// mode, our environment and stdio, writable folders from BB_SPAWN_WRITABLE, colon-separated).
int spawn_by_hand() {
  std::ifstream in("/proc/self/cmdline");
  SpawnSpec spec;
  for (std::string arg; std::getline(in, arg, '\0');) spec.argv.push_back(arg);
  spec.argv.erase(spec.argv.begin());
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "BB_ISOLATION_HELPER=", 20) != 0) spec.env.emplace_back(*e);
  spec.fds = {{0, 0}, {1, 1}, {2, 2}};
  std::istringstream writable(env_or("BB_SPAWN_WRITABLE"));
  for (std::string w; std::getline(writable, w, ':');) spec.writable.push_back(w);
  const auto s = bb::replay::spawn_isolated(spec);
  std::fprintf(stderr, "isolation: %s%s%s\n", s.isolation.c_str(), s.refused.empty() ? "" : "; refused: ",
               s.refused.c_str());
  int status = 0;
  waitpid(s.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_helper(const std::string& mode) {
  if (mode == "spawn") return spawn_by_hand();
  if (mode == "fds") {
    const std::string line = open_fds() + "\n";
    const int out = std::atoi(env_or("BB_HELPER_OUT", "1").c_str());
    return write(out, line.data(), line.size()) == ssize_t(line.size()) ? 0 : 1;
  }
  std::map<std::string, std::string> r;
  probe_files(r);
  probe_processes(r);
  probe_mounts(r);
  for (const auto& [k, v] : r) std::printf("%s=%s\n", k.c_str(), v.c_str());
  std::fflush(stdout);
  return 0;
}

const bool g_is_helper = [] {
  const char* mode = std::getenv("BB_ISOLATION_HELPER");
  if (mode) _exit(run_helper(mode));
  return false;
}();

// ---- the test side ----

std::string self_exe() {
  char buf[4096] = {};
  return readlink("/proc/self/exe", buf, sizeof buf - 1) > 0 ? buf : "";
}

struct Child {
  bb::replay::Spawned s;
  int out = -1;  // its stdout
  int in = -1;   // its stdin
};

Child start(const std::vector<std::string>& argv, Mode mode, const std::vector<std::string>& env = {},
            const std::vector<std::string>& writable = {}) {
  int out[2], in[2];
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(pipe2(in, O_CLOEXEC) == 0);
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.env.insert(spec.env.end(), env.begin(), env.end());
  spec.fds = {{in[0], 0}, {out[1], 1}, {2, 2}};
  spec.writable = writable;
  spec.mode = mode;
  Child c;
  c.s = bb::replay::spawn_isolated(spec);
  close(out[1]);
  close(in[0]);
  c.out = out[0];
  c.in = in[1];
  return c;
}

std::string read_line(int fd) {
  std::string line;
  char ch = 0;
  while (read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
  return line;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  return out;
}

// Ends the child (closing its stdin ends a `read`), reaps it, returns its wait status.
int finish(Child& c, bool kill_it = false) {
  if (kill_it) kill(c.s.pid, SIGKILL);
  if (c.in >= 0) close(c.in), c.in = -1;
  if (c.out >= 0) close(c.out), c.out = -1;
  int status = 0;
  while (waitpid(c.s.pid, &status, 0) < 0 && errno == EINTR) {}
  return status;
}

bool wait_until(const std::function<bool()>& ok, double seconds = 5) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ok()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string file_text(const std::string& path);
std::string proc_field(pid_t pid, const std::string& file) { return file_text("/proc/" + std::to_string(pid) + "/" + file); }

bool gone(pid_t pid) { return kill(pid, 0) == -1 && errno == ESRCH; }

bool gone_or_zombie(pid_t pid) {
  const std::string stat = proc_field(pid, "stat");
  const size_t close = stat.rfind(')');
  return gone(pid) || (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z');
}

bool contains(const std::vector<pid_t>& v, pid_t pid) { return std::find(v.begin(), v.end(), pid) != v.end(); }

// The pid (in our namespace) of a living `sleep` below `root`; 0 if none within 5 s.
pid_t find_sleeper(pid_t root) {
  pid_t found = 0;
  wait_until([&] {
    for (pid_t p : bb::replay::living_descendants(root))
      if (proc_field(p, "comm") == "sleep") return (found = p) != 0;
    return false;
  });
  return found;
}

// The inode of a namespace file (/proc/<pid>/ns/...), or of the user namespace that owns it.
ino_t ns_inode(const std::string& path, bool owner = false) {
  struct stat st = {};
  if (!owner) return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int user = fd < 0 ? -1 : ioctl(fd, NS_GET_USERNS);
  const bool ok = user >= 0 && fstat(user, &st) == 0;
  if (user >= 0) close(user);
  if (fd >= 0) close(fd);
  return ok ? st.st_ino : 0;
}

// Whether this host lets a child start in namespaces (once; says why not).
bool namespaces_allowed() {
  static int allowed = -1;
  if (allowed < 0) {
    Child c = start({"/bin/true"}, Mode::Auto);
    allowed = c.s.isolation == "namespaces";
    if (!allowed) WARN("namespaces refused on this host, namespace tests skipped: " << c.s.refused);
    finish(c);
  }
  return allowed == 1;
}

std::map<std::string, std::string> parse(const std::string& text) {
  std::map<std::string, std::string> r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (const size_t eq = line.find('='); eq != std::string::npos) r[line.substr(0, eq)] = line.substr(eq + 1);
  return r;
}

// What spawn_isolated throws ("" when it does not), reaping the child when it starts.
std::string thrown(const SpawnSpec& spec) {
  try {
    waitpid(bb::replay::spawn_isolated(spec).pid, nullptr, 0);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// A failed REQUIRE leaves its sleepers behind: whatever is still ours goes when the binary ends.
struct KillLeftovers {
  ~KillLeftovers() { bb::replay::kill_strays(0, {}); }
} g_kill_leftovers;

const std::string kEscape = "(setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!)";

}  // namespace

TEST_CASE("subreaper mode: a double-forked setsid sleeper is a stray child, and kill_strays kills it") {
  Child c = start({"/bin/sh", "-c", kEscape + "; exit 0"}, Mode::Subreaper);
  REQUIRE(c.s.isolation == "subreaper");
  const pid_t sleeper = std::atoi(read_all(c.out).c_str());
  REQUIRE(sleeper > 0);
  CHECK(WEXITSTATUS(finish(c)) == 0);
  CHECK(bb::replay::living_descendants(c.s.pid).empty());
  CHECK(contains(bb::replay::stray_children({}), sleeper));
  CHECK(!contains(bb::replay::stray_children({sleeper}), sleeper));
  CHECK(bb::replay::kill_strays(c.s.pid, {}) >= 1);
  CHECK(gone(sleeper));  // killed and reaped
  CHECK(bb::replay::stray_children({}).empty());
}

TEST_CASE("namespace mode: a double-forked setsid sleeper dies with the child") {
  if (!namespaces_allowed()) return;
  Child c = start({"/bin/sh", "-c", kEscape + "; read x; exit 0"}, Mode::Namespaces);
  REQUIRE(c.s.isolation == "namespaces");
  const std::string ns_pid = read_line(c.out);
  const pid_t sleeper = find_sleeper(c.s.pid);
  REQUIRE(sleeper > 0);
  std::ifstream status("/proc/" + std::to_string(sleeper) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("NSpid:", 0) == 0) CHECK(line.substr(line.find_last_of(" \t") + 1) == ns_pid);
  CHECK(!contains(bb::replay::stray_children({c.s.pid}), sleeper));  // reparented to the child, not to us
  // Its mounts were copied into a second user namespace (which locks them): the one that owns its
  // mount namespace, not the one that owns its PID namespace.
  const std::string ns = "/proc/" + std::to_string(c.s.pid) + "/ns/";
  CHECK(ns_inode(ns + "mnt", true) == ns_inode(ns + "user"));
  CHECK(ns_inode(ns + "pid", true) != ns_inode(ns + "user"));
  CHECK(ns_inode(ns + "pid", true) != ns_inode("/proc/self/ns/user"));
  CHECK(WEXITSTATUS(finish(c)) == 0);                                // the child ends on its own...
  CHECK(wait_until([&] { return gone(sleeper); }));                  // ...and takes the sleeper with it
}

TEST_CASE("kill_strays kills the descendants, escaped or not, and leaves root alone") {
  const bool ns = namespaces_allowed();
  for (Mode mode : {Mode::Subreaper, Mode::Namespaces}) {
    if (mode == Mode::Namespaces && !ns) continue;
    CAPTURE(mode == Mode::Namespaces);
    Child c = start({"/bin/sh", "-c", "exec 2>/dev/null; sleep 300 </dev/null >/dev/null & " + kEscape + "; read x; exit 0"}, mode);
    REQUIRE(!read_line(c.out).empty());
    const pid_t first = find_sleeper(c.s.pid);
    REQUIRE(first > 0);
    const int killed = bb::replay::kill_strays(c.s.pid, {c.s.pid});
    CHECK(killed >= 2);  // the plain child and the escaped one (in the child's namespace or ours)
    CHECK(gone_or_zombie(first));
    CHECK(bb::replay::living_descendants(c.s.pid).empty());
    CHECK(bb::replay::stray_children({c.s.pid}).empty());
    CHECK(!gone_or_zombie(c.s.pid));
    CHECK(WEXITSTATUS(finish(c)) == 0);
  }
}

TEST_CASE("kill_strays keeps killing while a stray forks") {
  const std::string forker = "(setsid sh -c 'while :; do sleep 300 & sleep 0.01; done' </dev/null >/dev/null 2>&1 &)";
  Child c = start({"/bin/sh", "-c", forker + "; exit 0"}, Mode::Subreaper);
  CHECK(WEXITSTATUS(finish(c)) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(bb::replay::stray_children({}).size() >= 1);
  CHECK(bb::replay::kill_strays(c.s.pid, {}) >= 3);
  CHECK(bb::replay::stray_children({}).empty());
}

TEST_CASE("the child gets only the fds given, whatever their numbers") {
  const bool ns = namespaces_allowed();
  for (Mode mode : {Mode::Subreaper, Mode::Namespaces}) {
    if (mode == Mode::Namespaces && !ns) continue;
    CAPTURE(mode == Mode::Namespaces);
    int p[2];
    REQUIRE(pipe2(p, O_CLOEXEC) == 0);
    const int null = open("/dev/null", O_RDWR);  // not close-on-exec: must still not leak
    const int w = p[1];
    SpawnSpec spec;
    spec.argv = {self_exe()};
    spec.env = {"BB_ISOLATION_HELPER=fds", "BB_HELPER_OUT=" + std::to_string(null)};
    spec.fds = {{w, null}, {null, w}};  // each one's number is the other's target
    spec.mode = mode;
    const auto s = bb::replay::spawn_isolated(spec);
    close(w);
    const std::string listed = read_line(p[0]);
    CHECK(listed == std::to_string(std::min(w, null)) + " " + std::to_string(std::max(w, null)));
    int status = 0;
    waitpid(s.pid, &status, 0);
    CHECK(WEXITSTATUS(status) == 0);
    close(p[0]);
    close(null);
  }
}

namespace {

void check_files(std::map<std::string, std::string>& r, const std::string& dir, const std::string& tmp_dir,
                 const std::string& tag) {
  CHECK(r["ro_write"] == std::to_string(EROFS));
  CHECK(access((dir + "/probe-" + tag).c_str(), F_OK) != 0);
  CHECK(r["rw_write"] == "ok");
  CHECK(file_text(dir + "/rw/probe") == "hello");
  CHECK(r["tmp_rw_write"] == "ok");  // a writable folder under /tmp stays writable
  CHECK(file_text(tmp_dir + "/probe") == "hello");
  CHECK(r["tmp_write"] == std::to_string(EROFS));  // the host's /tmp is there, read-only (backends may be in it)
  CHECK(access(("/tmp/bb-isolation-probe-" + tag).c_str(), F_OK) != 0);
  CHECK(r["shm_write"] == "ok");
  CHECK(r["devnull_write"] == "ok");
  CHECK(r["mknod_block"] != "ok");
  CHECK(r["sysctl_open"] == std::to_string(EROFS));
  if (r.count("sysrq_open")) CHECK(r["sysrq_open"] == std::to_string(EROFS));
}

void check_mounts(std::map<std::string, std::string>& r) {
  CHECK(r["remount_root"] == std::to_string(EPERM));
  CHECK(r["umount_dev"] == std::to_string(EPERM));
  if (r["nested_unshare"] == "ok") {  // in a user namespace of its own: still locked
    CHECK(r["nested_remount_root"] == std::to_string(EPERM));
    CHECK(r["nested_remount_proc"] == std::to_string(EPERM));
    CHECK(r["nested_umount_dev"] != "ok");
  }
  std::istringstream dev(r["dev"]);
  const std::set<std::string> allowed = {"null", "zero", "full", "random", "urandom", "shm"};
  std::set<std::string> names;
  for (std::string n; dev >> n;) names.insert(n);
  for (const auto& n : allowed) CHECK(names.count(n) == 1);
  for (const auto& n : names) CHECK((n.rfind("nvidia", 0) == 0 || allowed.count(n) == 1));
  CHECK(names.count("vda") + names.count("sda") + names.count("nvme0n1") + names.count("loop0") == 0);
}

void check_processes(std::map<std::string, std::string>& r, const std::string& tag, pid_t decoy) {
  CHECK(r["uid"] == std::to_string(getuid()));
  CHECK(r["gid"] == std::to_string(getgid()));
  CHECK(r["kill_" + tag] != "ok");
  CHECK(r["kill_" + std::to_string(decoy)] != "ok");
  CHECK(!gone_or_zombie(decoy));
  if (r["proc_self"] == "1") {  // a fresh /proc of its own PID namespace
    CHECK(r["proc_pids"] == "1");
    CHECK(r["proc_has_parent"] == "no");
    CHECK(r["comm_write"] == "ok");
  } else {
    WARN("fresh /proc refused on this host; the child sees the old one (it is pid " << r["proc_self"] << ")");
  }
}

}  // namespace

TEST_CASE("namespace mode: read-only tree (/tmp too), private /dev, /dev/shm and /proc, same uid, parent out of reach") {
  if (!namespaces_allowed()) return;
  const std::string tag = std::to_string(getpid());
  const std::string dir = std::string(BB_ISOLATION_TEST_DIR) + "/" + tag, tmp_dir = "/tmp/bb-isolation-" + tag;
  REQUIRE(system(("mkdir -p " + dir + "/rw " + tmp_dir).c_str()) == 0);
  const pid_t decoy = fork();  // a process of ours that the child tries to kill
  if (decoy == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pause();
    _exit(0);
  }
  struct Reap {
    pid_t pid;
    ~Reap() { kill(pid, SIGKILL), waitpid(pid, nullptr, 0); }
  } reap_decoy{decoy};
  for (bool fallback : {false, true}) {  // mount_setattr, then a remount of each mount point
    CAPTURE(fallback);
    bb::replay::force_remount_fallback_for_tests(fallback);
    Child c = start({self_exe()}, Mode::Namespaces,
                    {"BB_ISOLATION_HELPER=probe", "BB_PROBE_RO=" + dir, "BB_PROBE_RW=" + dir + "/rw",
                     "BB_PROBE_TMP_RW=" + tmp_dir, "BB_PROBE_TAG=" + tag, "BB_PROBE_PARENT=" + tag,
                     "BB_PROBE_KILL=" + tag + " " + std::to_string(decoy)},
                    {dir + "/rw", tmp_dir});
    bb::replay::force_remount_fallback_for_tests(false);
    REQUIRE(c.s.isolation == "namespaces");
    auto r = parse(read_all(c.out));
    CHECK(WEXITSTATUS(finish(c)) == 0);
    check_files(r, dir, tmp_dir, tag);
    check_mounts(r);
    check_processes(r, tag, decoy);
  }
  CHECK(system(("rm -rf " + dir + " " + tmp_dir).c_str()) == 0);
}

TEST_CASE("the child dies with the thread that spawned it") {
  const bool ns = namespaces_allowed();
  for (Mode mode : {Mode::Subreaper, Mode::Namespaces}) {
    if (mode == Mode::Namespaces && !ns) continue;
    CAPTURE(mode == Mode::Namespaces);
    int p[2];
    REQUIRE(pipe(p) == 0);
    const pid_t middle = fork();
    if (middle == 0) {
      try {
        SpawnSpec spec;
        spec.argv = {"/bin/sleep", "300"};
        spec.mode = mode;
        const pid_t pid = bb::replay::spawn_isolated(spec).pid;
        _exit(write(p[1], &pid, sizeof pid) == sizeof pid ? 0 : 1);
      } catch (...) {
        _exit(2);
      }
    }
    close(p[1]);
    pid_t child = 0;
    REQUIRE(read(p[0], &child, sizeof child) == sizeof child);
    close(p[0]);
    waitpid(middle, nullptr, 0);
    CHECK(wait_until([&] { return gone_or_zombie(child); }));
    while (waitpid(child, nullptr, WNOHANG) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_CASE("spawn_isolated: a bad spec or a missing program throws; the exit status comes through") {
  SpawnSpec spec;
  spec.argv = {"sh", "-c", "exit 3"};
  CHECK(thrown(spec).find("absolute") != std::string::npos);
  spec.argv = {"/nonexistent/program"};
  for (Mode mode : {Mode::Subreaper, Mode::Auto}) {
    spec.mode = mode;
    const std::string what = thrown(spec);
    CAPTURE(what);
    CHECK(what.find("execve /nonexistent/program: No such") != std::string::npos);
  }
  spec.fds = {{12345, 0}};
  CHECK(thrown(spec).find("bad fd") != std::string::npos);
  spec.fds = {};
  spec.argv = {"/bin/sh", "-c", "exit 3"};
  spec.writable = {"/nonexistent/folder"};
  spec.mode = Mode::Namespaces;
  CHECK(thrown(spec).find("writable") != std::string::npos);
  spec.writable = {};
  for (Mode mode : {Mode::Subreaper, Mode::Auto}) {
    spec.mode = mode;
    const pid_t pid = bb::replay::spawn_isolated(spec).pid;
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WEXITSTATUS(status) == 3);
  }
}

TEST_CASE("spawning from several threads at once, while another allocates") {
  const Mode modes[] = {Mode::Subreaper, namespaces_allowed() ? Mode::Namespaces : Mode::Subreaper};
  std::atomic<bool> stop{false};
  std::thread churn([&] {  // holds malloc's locks now and then: a child that allocated could hang
    std::vector<std::string> kept;
    while (!stop) {
      kept.emplace_back(1000, 'x');
      if (kept.size() > 1000) kept.clear();
    }
  });
  std::atomic<int> ok{0};
  std::vector<std::thread> spawners;
  for (int t = 0; t < 4; ++t)
    spawners.emplace_back([&, t] {
      SpawnSpec spec;
      spec.argv = {"/bin/sh", "-c", "exit 7"};
      spec.mode = modes[t % 2];
      for (int i = 0; i < 10; ++i) {
        int status = 0;
        waitpid(bb::replay::spawn_isolated(spec).pid, &status, 0);
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 7;
      }
    });
  for (auto& t : spawners) t.join();
  stop = true;
  churn.join();
  CHECK(ok == 40);
}
