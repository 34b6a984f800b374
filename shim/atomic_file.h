// Replacing a file so that readers see the old content or the new, never a partial write.
#pragma once

#include <string>

namespace bb::shim {

// Writes `text` to a temporary file beside `path`, then rename(2)s it over `path`.
// Returns "" on success, else what failed and why.
std::string write_file_atomic(const std::string& path, const std::string& text);

}  // namespace bb::shim
