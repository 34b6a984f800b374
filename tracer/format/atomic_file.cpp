#include "tracer/format/atomic_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bb::format {
namespace {

// A new file beside `path` under a name no one can predict, created exclusively (O_EXCL: an existing
// name, a planted symlink included, is never opened); -1 with errno on failure. `tmp` gets its name.
int create_temp(const std::string& path, std::string& tmp) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string name = dir + "." + base + ".tmp.XXXXXX";
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  tmp = name;
  if (fd >= 0 && ::fchmod(fd, 0644) != 0) {  // (mkostemp makes it 0600; traces are ordinary files)
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = err;
    return -1;
  }
  return fd;
}

std::string failure(const char* what, const std::string& file) {
  return std::string(what) + " " + file + ": " + std::strerror(errno);
}

}  // namespace

bool write_fully(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp;
  const int fd = create_temp(path, tmp);
  if (fd < 0) return failure("cannot create", tmp);
  if (!write_fully(fd, text.data(), text.size())) {
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

}  // namespace bb::format
