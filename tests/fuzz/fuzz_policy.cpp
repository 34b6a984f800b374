// libFuzzer target: the policy reader (policy/policy.h; ops are checked against torch's dispatcher, so
// this target links libtorch, which is not instrumented). Checks, beyond "no crash, leak or hang": the
// text and the file (load_policy, what the preload and bbreplay call) give the same result.
#include <sstream>

#include "policy/policy.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

std::string describe(const bb::policy::OpPolicy& p) {
  std::ostringstream out;
  out << p.op << ' ' << bb::policy::to_string(p.mode) << ' ' << static_cast<int>(p.on_error) << ' ' << p.strict_strides
      << ' ' << p.line << " devices " << p.when.devices.size() << " dtypes " << p.when.dtypes.size() << " tolerances "
      << p.tolerance.size();
  if (p.when.rank) out << " rank " << p.when.rank->first << '-' << p.when.rank->second;
  if (p.when.numel) out << " numel " << p.when.numel->first << '-' << p.when.numel->second;
  out << " allow_aten " << (p.allow_aten.all ? "all" : "");
  for (const auto& op : p.allow_aten.ops) out << ' ' << op;
  return out.str();
}

std::string describe(const bb::policy::Policy& p) {
  std::string out = p.source + " backend " + p.backend.value_or("-") + "\ndefault " + describe(p.defaults) + "\n";
  for (const auto& op : p.ops) out += describe(op) + "\n";
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bb::fuzz::ScratchFile file;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string from_text =
      bb::fuzz::outcome([&] { return describe(bb::policy::parse_policy(text, file.path())); });
  file.write(data, size);
  bb::fuzz::require_same("parse_policy", from_text, "load_policy",
                         bb::fuzz::outcome([&] { return describe(bb::policy::load_policy(file.path())); }));
  // BB_CONFIG's form: the policy under a key of a larger file.
  bb::fuzz::outcome([&] { return describe(bb::policy::load_policy_section(file.path(), "policy")); });
  return 0;
}
