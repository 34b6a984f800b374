// Reading input files (traces, TorchBench logs, policies, the preload's settings): the error every
// reader throws, which says where ("file:line:column: message"), and the limits on what they take.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace bb::format {

// An input that cannot be read. what() is "file:line:column: message" (1-based line and column; line 0:
// the file as a whole).
class InputError : public std::runtime_error {
 public:
  InputError(const std::string& source, int line, int column, const std::string& message);
  const std::string& source() const { return source_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  std::string source_;
  int line_;
  int column_;
};

// Limits on what the readers (YAML traces, TorchBench logs, policies) take, so that a hostile or broken
// input is an error that says which limit and where instead of a crash, a hang or gigabytes of memory.
// Far above anything real: the largest traces seen are tens of MB; the readers hold a file's text and its
// parse tree in memory at once.
constexpr int64_t kMaxInputBytes = int64_t{1} << 30;
// Brackets inside brackets: the readers recurse once per level, and a real trace nests a few levels.
constexpr int kMaxNesting = 64;
// Dimensions of one tensor. Torch itself sets no general limit (its CUDA kernels take at most 25), so
// this is bbshim's own, far above real shapes; each dimension costs the readers memory.
constexpr int kMaxRank = 64;

// The whole text of an input file: a regular file of at most kMaxInputBytes. Anything else (a FIFO,
// which would block forever; /dev/zero, which never ends; a directory; a larger file) is an InputError at
// line 0 that says why. Every reader loads its file through this.
std::string read_input_file(const std::string& path);

}  // namespace bb::format
