#include "replay/case/cases.h"

#include <fnmatch.h>

#include <sstream>

namespace bb::replay {

OpFilter::OpFilter(const std::string& list) {
  std::stringstream ss(list);
  std::string p;
  while (std::getline(ss, p, ',')) {
    p.erase(0, p.find_first_not_of(" \t"));
    p.erase(p.find_last_not_of(" \t") + 1);
    if (p.empty()) continue;
    patterns_.push_back(p.find("::") == std::string::npos ? "aten::" + p : p);
  }
}

bool OpFilter::matches(const std::string& op) const {
  if (patterns_.empty()) return true;
  for (const auto& p : patterns_)
    if (fnmatch(p.c_str(), op.c_str(), 0) == 0) return true;
  return false;
}

std::vector<std::string> OpFilter::unused(const std::vector<std::string>& ops) const {
  std::vector<std::string> out;
  for (const auto& p : patterns_) {
    bool hit = false;
    for (const auto& op : ops) hit |= fnmatch(p.c_str(), op.c_str(), 0) == 0;
    if (!hit) out.push_back(p);
  }
  return out;
}

std::vector<Case> enumerate_cases(const trace::Trace& trace, const OpFilter& filter,
                                  const std::vector<std::string>& variants, const VariantCheck& applies) {
  std::vector<Case> out;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    if (!filter.matches(trace.ops[i].op)) continue;
    for (const auto& v : variants)
      if (v == "traced" || !applies || applies(trace.ops[i], v)) out.push_back({i, v});
  }
  return out;
}

}  // namespace bb::replay
