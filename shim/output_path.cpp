#include "shim/output_path.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bb::shim {
namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// Resolves symlinks in the folder part, so two spellings of one file claim the same name.
std::string canonical(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char buf[PATH_MAX];
  if (::realpath(dir.empty() ? "/" : dir.c_str(), buf)) return std::string(buf) + "/" + base;
  return path;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::string planned_trace_path(const std::string& configured, const ProcessIdentity& id, const std::string& cwd) {
  std::string path = configured.empty() ? "bbtrace.yaml" : configured;
  const bool ranked = id.rank && id.world_size && *id.world_size > 1;
  const bool has_rank_token = path.find("%r") != std::string::npos;
  replace_all(path, "%p", std::to_string(id.pid));
  replace_all(path, "%r", id.rank ? std::to_string(*id.rank) : "0");
  if (ranked && !has_rank_token) path = insert_suffix(path, "rank" + std::to_string(*id.rank));
  if (path.empty() || path[0] != '/') path = cwd + "/" + path;
  return path;
}

std::string insert_suffix(const std::string& path, const std::string& suffix) {
  auto slash = path.rfind('/');
  auto dot = path.rfind('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  if (!has_ext) return path + "." + suffix;
  return path.substr(0, dot) + "." + suffix + path.substr(dot);
}

PathClaim::Result PathClaim::claim(const std::string& absolute_path) {
  release();
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Result::Unsupported;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  char name[64];
  int n = std::snprintf(name, sizeof name, "bbshim-trace-%016llx",
                        static_cast<unsigned long long>(fnv1a(canonical(absolute_path))));
  std::memcpy(addr.sun_path + 1, name, static_cast<size_t>(n));  // sun_path[0] == 0: abstract
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<size_t>(n));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
    fd_ = fd;
    return Result::Claimed;
  }
  const int err = errno;
  ::close(fd);
  return err == EADDRINUSE ? Result::Taken : Result::Unsupported;
}

void PathClaim::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string claim_trace_path(const std::string& path, long pid, PathClaim& claim, std::string* note) {
  if (note) note->clear();
  if (claim.claim(path) != PathClaim::Result::Taken) return path;
  std::string alt = insert_suffix(path, std::to_string(pid));
  claim.claim(alt);
  if (note) *note = path + " is being written by another running process; this one writes " + alt;
  return alt;
}

}  // namespace bb::shim
