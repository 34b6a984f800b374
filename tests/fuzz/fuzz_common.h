// Shared by the libFuzzer targets of the readers (README.md here). Each target hands the bytes to a
// reader twice: as text (parse_*), and as a file on disk through the entry point the tools use
// (load_*), which adds the file checks of trace::read_input_file. Both must agree.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tracer/format/trace_yaml.h"

namespace bb::fuzz {

// A file of this process's own under TMPDIR (or /tmp), rewritten for every input and removed at exit.
class ScratchFile {
 public:
  // BB_FUZZ_SCRATCH (run.sh sets it, in the run's own folder): the same name in every run, so that a
  // fixed seed tries the same inputs along the same paths (the name is in the trace's argv).
  ScratchFile() {
    const char* fixed = std::getenv("BB_FUZZ_SCRATCH");
    const char* dir = std::getenv("TMPDIR");
    path_ = fixed && *fixed ? std::string(fixed)
                            : std::string(dir && *dir ? dir : "/tmp") + "/bb-fuzz-" + std::to_string(::getpid()) + ".in";
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

  void write(const uint8_t* data, size_t size) const {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("cannot create");
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) die("cannot write");
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }

 private:
  [[noreturn]] void die(const char* what) const {
    std::fprintf(stderr, "bb fuzz: %s %s\n", what, path_.c_str());
    std::abort();
  }
  std::string path_;
};

// What a read came to: "ok" plus the result's text, or the error message. Anything other than a
// FormatError escapes (a crash for libFuzzer): the readers promise file:line:column errors only.
template <class Read>
std::string outcome(Read read) {
  try {
    return "ok\n" + read();
  } catch (const trace::FormatError& e) {
    if (e.line() < 0 || e.column() < 0) std::abort();
    return std::string("error\n") + e.what();
  }
}

// Two reads that must agree (the text and the file; a trace and its written form): aborts, showing
// both, when they do not.
inline void require_same(const char* what_a, const std::string& a, const char* what_b, const std::string& b) {
  if (a == b) return;
  std::fprintf(stderr, "bb fuzz: %s and %s differ\n--- %s:\n%s\n--- %s:\n%s\n", what_a, what_b, what_a, a.c_str(),
               what_b, b.c_str());
  std::abort();
}

inline bool ok(const std::string& outcome) { return outcome.rfind("ok\n", 0) == 0; }

}  // namespace bb::fuzz
