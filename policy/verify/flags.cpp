#include "policy/verify/flags.h"

#include <array>

namespace bb::verify {
namespace {

constexpr size_t kFlags = static_cast<size_t>(Flag::TimerTampering) + 1;
// In the order of the enum.
constexpr std::array<const char*, kFlags> kNames{
    "native-call",         "cached-result", "unwritten-output",      "input-mutation",   "aliasing",
    "precision-downgrade", "escaping-work", "environment-tampering", "impossible-speed", "dispatcher-override",
    "timer-tampering",
};

}  // namespace

const char* flag_name(Flag f) {
  const auto i = static_cast<size_t>(f);
  return i < kFlags ? kNames[i] : "unknown-flag";
}

std::optional<Flag> flag_from_name(const std::string& name) {
  for (Flag f : all_flags())
    if (name == flag_name(f)) return f;
  return std::nullopt;
}

const std::vector<Flag>& all_flags() {
  static const std::vector<Flag> all = [] {
    std::vector<Flag> out;
    for (size_t i = 0; i < kFlags; ++i) out.push_back(static_cast<Flag>(i));
    return out;
  }();
  return all;
}

std::vector<std::string> flag_names(const std::vector<Flag>& flags) {
  std::vector<std::string> out;
  for (Flag f : flags) out.push_back(flag_name(f));
  return out;
}

std::string flag_names(const std::vector<Flag>& flags, const std::string& separator) {
  std::string out;
  for (Flag f : flags) out += (out.empty() ? "" : separator) + flag_name(f);
  return out;
}

}  // namespace bb::verify
