#include "tracer/format/input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace bb::format {

InputError::InputError(const std::string& source, int line, int column, const std::string& message)
    : std::runtime_error(source + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message),
      source_(source),
      line_(line),
      column_(column) {}

std::string read_input_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer, forever if none comes.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(path, 0, 0, "cannot open file");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path, 0, 0, std::string("cannot read file: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(path, 0, 0, "is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    throw InputError(path, 0, 0, "not a regular file (a FIFO, a device or a socket cannot be read as input)");
  const std::string too_large = "larger than the input limit of " + std::to_string(kMaxInputBytes >> 30) + " GiB";
  if (st.st_size > kMaxInputBytes) throw InputError(path, 0, 0, too_large);
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t have = 0;
  for (;;) {  // until end of file: the file may have grown since fstat
    if (have == text.size()) {
      if (text.size() > static_cast<size_t>(kMaxInputBytes)) throw InputError(path, 0, 0, too_large);
      text.resize(std::max<size_t>(text.size() * 2, 4096));
    }
    const ssize_t n = ::read(fd, text.data() + have, text.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(path, 0, 0, std::string("cannot read file: ") + std::strerror(errno));
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (have > static_cast<size_t>(kMaxInputBytes)) throw InputError(path, 0, 0, too_large);
  text.resize(have);
  return text;
}

}  // namespace bb::format
