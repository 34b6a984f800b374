#include "replay/judgeable/judgeable.h"

namespace bb::replay {

std::string bookkeeping(const std::string& op) {
  const std::string reason = "profiler bookkeeping (a ";
  if (op.find("_record_function") != std::string::npos) return reason + "record_function marker): it computes nothing";
  if (op.rfind("profiler::", 0) == 0 || op.rfind("ProfilerStep#", 0) == 0 ||
      (op.size() > 4 && op.rfind("## ", 0) == 0 && op.compare(op.size() - 3, 3, " ##") == 0))
    return reason + "profiler marker): it computes nothing";
  return "";
}

std::string foreign_library(const std::string& op) {
  return op + " belongs to the library " + op.substr(0, op.find("::")) +
         ", which bbreplay does not load (not an ATen op)";
}

std::string unrebuildable_argument(const trace::ArgValue& a) {
  using trace::ArgKind;
  if (a.kind == ArgKind::Symbolic || a.kind == ArgKind::Other || a.kind == ArgKind::Generator)
    return "argument " + a.name + " (" + to_string(a.kind) + ") cannot be rebuilt";
  for (const auto& t : a.tensors)
    if (t && (t->symbolic || t->layout != "strided"))
      return "argument " + a.name + " is a " + (t->symbolic ? "symbolic-shaped" : t->layout) + " tensor";
  return "";
}

bool deterministic_by_arguments(const std::vector<std::pair<std::string, const trace::ArgValue*>>& named) {
  using trace::ArgKind;
  for (const auto& [name, a] : named) {
    if (!a) continue;
    const bool probability = name == "p" || name == "dropout_p";
    if (probability && ((a->kind == ArgKind::Float && a->f == 0.0) || (a->kind == ArgKind::Int && a->i == 0)))
      return true;
    if ((name == "train" || name == "training") && a->kind == ArgKind::Bool && !a->b) return true;
  }
  return false;
}

}  // namespace bb::replay
