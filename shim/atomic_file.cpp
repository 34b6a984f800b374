#include "shim/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tracer/log.h"

namespace bb::shim {
namespace {

std::string temp_name(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + ".tmp." + std::to_string(::getpid());
}

std::string failure(const char* what, const std::string& file) {
  return std::string(what) + " " + file + ": " + std::strerror(errno);
}

}  // namespace

std::string write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = temp_name(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failure("cannot create", tmp);
  if (!log::write_fully(fd, text.data(), text.size())) {
    std::string err = failure("cannot write", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return err;
  }
  if (::close(fd) != 0) {
    std::string err = failure("cannot write", tmp);
    ::unlink(tmp.c_str());
    return err;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = failure("cannot replace", path);
    ::unlink(tmp.c_str());
    return err;
  }
  return "";
}

}  // namespace bb::shim
