#include "shim/config.h"

#include "shim/settings.h"
#include "tracer/format/yaml_read.h"

namespace bb::shim {
namespace {

// The file's settings; a problem throws format::InputError (the caller ignores the whole file).
void read_config_file(const std::string& file, Config& c) {
  yaml::Reader r(file);
  YAML::Node root = r.load_file();
  if (root.IsNull()) return;
  if (!root.IsMap()) r.fail(root, "expected a map of settings");
  const auto slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : file.substr(0, slash + 1);
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const Setting* s = setting_for_key(key);
    if (!s) {
      std::string names;
      for (const Setting& known : settings()) names += std::string(names.empty() ? "" : ", ") + known.key;
      r.fail(kv.first, "unknown key '" + key + "' (expected " + names + ")");
    }
    if (key == "policy" && kv.second.IsMap()) {  // written inline: parsed (with its own checks) when routing starts
      c.policy = file;
      c.policy_section = "policy";
      continue;
    }
    const std::string text = r.scalar<std::string>(kv.second, "a single value");
    if (std::string why = s->read(text, dir, c); !why.empty()) r.fail(kv.second, key + " '" + text + "' " + why);
  }
}

}  // namespace

Config config_from_env(const Getenv& getenv) {
  Config c;
  if (const char* file = getenv("BB_CONFIG"); file && *file) {
    Config from_file;
    try {
      read_config_file(file, from_file);
      c = from_file;
    } catch (const format::InputError& e) {
      c.problems.push_back(std::string("config error: ") + e.what() + "; the file is ignored");
    }
  }
  for (const Setting& s : settings()) {
    const char* v = getenv(s.env);
    if (!v || !*v) continue;
    if (std::string why = s.read(v, "", c); !why.empty())
      c.problems.push_back(std::string(s.env) + "='" + v + "' " + why + "; using " + s.current(c));
  }
  return c;
}

}  // namespace bb::shim
