#include "backends/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

extern char** environ;

namespace bb::backends {
namespace {

std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.emplace_back(*e);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

pid_t start(const Command& c, std::vector<std::string>& env) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> argv = c.argv;
  auto args = pointers(argv);
  auto envp = pointers(env);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    std::ofstream(c.log, std::ios::app) << "cannot run " << c.argv[0] << ": " << std::strerror(rc) << "\n";
    return -1;
  }
  return pid;
}

int status_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::vector<int> run_parallel(const std::vector<Command>& commands, int jobs) {
  std::vector<int> result(commands.size(), 127);
  std::vector<std::string> env = child_environment();
  std::map<pid_t, size_t> running;
  size_t next = 0;
  while (next < commands.size() || !running.empty()) {
    while (next < commands.size() && static_cast<int>(running.size()) < std::max(jobs, 1)) {
      pid_t pid = start(commands[next], env);
      if (pid > 0) running[pid] = next;
      ++next;
    }
    // Only our own children are waited for (by pid): inside a host program, waitpid(-1) would reap
    // the program's children and steal their exit status.
    bool any = false;
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      pid_t r = ::waitpid(it->first, &status, WNOHANG);
      if (r == 0) {
        ++it;
        continue;
      }
      result[it->second] = r > 0 ? status_code(status) : 127;
      it = running.erase(it);
      any = true;
    }
    if (!any && !running.empty()) ::usleep(2000);
  }
  return result;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace bb::backends
