// Every preload setting, declared once: its environment variable, its key in the BB_CONFIG file, how its
// value is read (with its limits) and its row of README.md's settings table (tests/unit/test_settings.cpp
// checks the README against this table). config_from_env (shim/config.h) reads both sources through it,
// with the same parsers and limits.
#pragma once

#include <string>
#include <vector>

#include "shim/config.h"

namespace bb::shim {

struct Setting {
  const char* env;    // BB_FLUSH_SECONDS
  const char* key;    // flush_seconds
  const char* value;  // the value as README.md writes it: `BB_FLUSH_SECONDS=s`
  const char* doc;    // what it does: the rest of its README row
  // Reads `text` into `c`: "" on success, else what is wrong with it ("is not a number in [0, 86400]"),
  // with `c` unchanged. `file_dir`: where the BB_CONFIG file is, for the paths it holds ("" for the
  // environment: paths as they are).
  std::string (*read)(const std::string& text, const std::string& file_dir, Config& c);
  // The value it falls back to after a problem, as the problem's text says it ("using 10").
  std::string (*current)(const Config& c);
};

// The settings, in the order of the README's table.
const std::vector<Setting>& settings();

// The setting of a BB_CONFIG key; null for a key that is none.
const Setting* setting_for_key(const std::string& key);

}  // namespace bb::shim
