// Starting a worker that runs untrusted code, so that it cannot reach the process that judges it, and
// later finding and killing everything it started. Torch-free, POSIX/Linux only.
//
// Namespace mode: the child is PID 1 of new user, PID, mount and network namespaces, keeps the
// caller's uid and gid, sees the whole file tree read-only except the `writable` directories, a
// private /tmp and /dev/shm, a /dev holding only null, zero, full, random, urandom and the nvidia*
// entries, and a /proc of its own namespace (writable for its processes' files, as CUDA needs;
// read-only elsewhere; where the host refuses a fresh one, the host's /proc, all read-only, and
// CUDA then fails to start with error 304). Its mounts are locked (a second user namespace) and its
// capabilities dropped. When it dies, the kernel kills every process of its PID namespace. As PID 1
// it ignores signals that it has no handler for when they come from inside its namespace. Subreaper mode (where the host
// refuses namespaces): the caller becomes a child subreaper, so that whatever the child detaches
// (double fork, setsid) is reparented to the caller, where stray_children and kill_strays find it; the
// child's capabilities are dropped (a root caller's child keeps its uid, not its capabilities: it cannot
// read the caller's memory nor attach to it) and it may gain no new privileges.
// In both modes the child gets SIGKILL when the thread that spawned it ends (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace bb::replay {

struct SpawnSpec {
  std::vector<std::string> argv;         // argv[0]: an absolute path
  std::vector<std::string> env;          // the child's whole environment, "NAME=value"
  std::vector<std::pair<int, int>> fds;  // (fd in the parent, fd number in the child): dup2'd; every other fd is closed in the child
  std::vector<std::string> writable;     // existing directories that stay writable in namespace mode (bind-mounted read-write)
  enum class Mode { Auto, Namespaces, Subreaper } mode = Mode::Auto;
};

struct Spawned {
  pid_t pid = -1;         // in the caller's PID namespace
  std::string isolation;  // "namespaces" or "subreaper"
  std::string refused;    // Auto fell back: why namespaces were refused (the failing step and strerror); "" otherwise
};

// Starts the child: Auto tries namespaces and falls back to subreaper mode (saying why in `refused`);
// Namespaces and Subreaper use that mode only. Throws std::runtime_error (with the reason) only when
// it cannot start at all (a bad spec, or the chosen mode failed). Safe in a multi-threaded caller; the
// calling thread must outlive the child (PR_SET_PDEATHSIG follows the spawning thread).
Spawned spawn_isolated(const SpawnSpec& spec);

// Makes the calling process a child subreaper (PR_SET_CHILD_SUBREAPER) once; idempotent.
void become_subreaper();

// Living (not zombie) descendants of `root`, excluding root itself, found through
// /proc/<pid>/task/*/children recursively (or /proc/*/stat's parent pids where that file is missing).
std::vector<pid_t> living_descendants(pid_t root);

// Living children of the calling process that are not in `known` (orphans reparented to this subreaper).
std::vector<pid_t> stray_children(const std::set<pid_t>& known);

// SIGKILLs every living descendant of `root` and every stray child of the caller (not in `known`),
// repeating until none is left (a process forking while being killed; at most 10 s while `root`
// itself keeps forking), then reaps the caller's own stray children by pid. Returns how many
// processes it killed. `root` itself is left alone. `known` must hold every child the caller keeps.
int kill_strays(pid_t root, const std::set<pid_t>& known);

// For tests: namespace mode remounts each mount point read-only (the way of kernels without
// mount_setattr, before 5.12) instead of calling mount_setattr.
void force_remount_fallback_for_tests(bool on);

}  // namespace bb::replay
