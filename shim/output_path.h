// Where a process writes its trace, so that concurrent processes never write the same file.
#pragma once

#include <optional>
#include <string>

namespace bb::shim {

struct ProcessIdentity {
  long pid = 0;
  std::optional<long> rank;        // RANK (torchrun)
  std::optional<long> world_size;  // WORLD_SIZE
};

// BB_TRACE (with %p -> pid, %r -> rank expanded) or bbtrace.yaml, made absolute against `cwd`. In a
// multi-rank run a path without %r gets ".rank<R>" before its extension.
std::string planned_trace_path(const std::string& configured, const ProcessIdentity& id, const std::string& cwd);

// dir/name.yaml + "1234" -> dir/name.1234.yaml; without an extension the suffix is appended.
std::string insert_suffix(const std::string& path, const std::string& suffix);

// The exclusive right to write one path while this process lives: a Linux abstract-namespace socket
// named after the path. The kernel releases it when the process dies; no lock file is left behind.
class PathClaim {
 public:
  enum class Result { Claimed, Taken, Unsupported };
  Result claim(const std::string& absolute_path);
  void release();

 private:
  int fd_ = -1;
};

// Claims `path`, or `path` with ".<pid>" inserted when another live process holds it. `note` says
// why the name changed (empty when it did not).
std::string claim_trace_path(const std::string& path, long pid, PathClaim& claim, std::string* note);

}  // namespace bb::shim
