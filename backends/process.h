// Running external programs (compilers) in parallel, each with its output captured in a file.
#pragma once

#include <string>
#include <vector>

namespace bb::backends {

struct Command {
  std::vector<std::string> argv;
  std::string log;  // stdout and stderr go here
};

// Runs every command, at most `jobs` at a time; returns each one's exit status (127: could not
// start, 128+N: killed by signal N). LD_PRELOAD is removed from their environment.
std::vector<int> run_parallel(const std::vector<Command>& commands, int jobs);

std::string read_text(const std::string& path);

}  // namespace bb::backends
