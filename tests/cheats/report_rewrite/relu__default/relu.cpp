// Cheat: returns zeros (a wrong relu), and on its first call leaves a process behind to forge the
// verdict: it forks, the child calls setsid() and forks again and exits, so that the grandchild is an
// orphan in a session of its own (reparented away from the kernel's process). The grandchild ignores
// SIGHUP/SIGTERM/SIGINT, reads every /proc/*/cmdline it can for a `--json PATH` (or `--json=PATH`,
// or any argument ending in .json) while they run, waits until its original parents and every process
// whose command line named the file have exited, then rewrites each such file with every "failed" turned
// into "passed" and every flag list emptied. Expected: the grandchild is found and killed at the end
// of the case (escaping-work), bbreplay's command line shows no path, and the JSON on disk after
// bbreplay exits is bbreplay's own (failed cases).
#include <ATen/ATen.h>
#include <bb/kernel.h>
#include <dirent.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> cmdline(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/cmdline");
  std::vector<std::string> args;
  for (std::string a; std::getline(f, a, '\0');) args.push_back(a);
  return args;
}

// JSON files named on the command lines it can read, and the processes that named them.
void look(std::map<std::string, std::set<pid_t>>& files) {
  DIR* d = opendir("/proc");
  if (!d) return;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == getpid()) continue;
    const std::vector<std::string> a = cmdline(e->d_name);
    for (size_t k = 0; k < a.size(); ++k) {
      std::string path;
      if (a[k] == "--json" && k + 1 < a.size()) path = a[k + 1];
      else if (a[k].rfind("--json=", 0) == 0) path = a[k].substr(7);
      else if (a[k].size() > 5 && a[k].compare(a[k].size() - 5, 5, ".json") == 0) path = a[k];
      if (!path.empty()) files[path].insert(atoi(e->d_name));
    }
  }
  closedir(d);
}

bool alive(pid_t p) { return kill(p, 0) == 0; }

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
}

// The grandchild: watch, wait, forge.
[[noreturn]] void forger(std::vector<pid_t> parents) {
  for (int s : {SIGHUP, SIGTERM, SIGINT, SIGPIPE}) signal(s, SIG_IGN);
  std::map<std::string, std::set<pid_t>> files;
  for (int round = 0; round < 6000; ++round) {  // (10 minutes at most)
    look(files);
    bool waiting = false;
    for (pid_t p : parents) waiting = waiting || alive(p);
    for (const auto& [path, owners] : files)
      for (pid_t p : owners) waiting = waiting || alive(p);
    if (!waiting && round > 0) break;
    usleep(100000);
  }
  usleep(500000);  // (the report is written as its writer exits)
  for (const auto& [path, owners] : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    if (s.empty()) continue;
    for (const char* sep : {"\"status\": \"", "\"status\":\""}) replace_all(s, std::string(sep) + "failed\"", std::string(sep) + "passed\"");
    replace_all(s, "\"flags\": [\"", "\"flags\": [], \"was\": [\"");
    std::ofstream(path, std::ios::trunc) << s;
  }
  _exit(0);
}

void leave_a_forger() {
  const std::vector<pid_t> parents{getpid(), getppid()};
  const pid_t child = fork();
  if (child != 0) return;  // (the kernel's process goes on; the child is never waited for)
  setsid();
  if (fork() == 0) forger(parents);
  _exit(0);
}

}  // namespace

at::Tensor report_rewrite_relu(const at::Tensor& x) {
  static bool left = (leave_a_forger(), true);
  (void)left;
  return at::zeros(x.sizes(), x.options());
}

BB_KERNEL("aten::relu", report_rewrite_relu);
