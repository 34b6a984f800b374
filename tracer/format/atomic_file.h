// Writing output files so that readers see the old content or the new, never a partial write: the
// preload's traces, bbreplay's reports and parts, bbtrace's outputs. The counterpart of input.h.
// Torch-free, and nothing of the project but this header (library bb_atomic_file).
#pragma once

#include <cstddef>
#include <string>

namespace bb::format {

// Writes `text` to a temporary file beside `path`, then rename(2)s it over `path`.
// Returns "" on success, else what failed and why.
std::string write_file_atomic(const std::string& path, const std::string& text);

// write(2) until all `n` bytes are out, retrying on EINTR; false on error. Async-signal-safe.
bool write_fully(int fd, const char* data, size_t n);

}  // namespace bb::format
