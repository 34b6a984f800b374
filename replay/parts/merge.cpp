// bbreplay merge: a run's parts (--shard K/N) into the report one run would have made.
#include <algorithm>
#include <map>
#include <optional>

#include "replay/parts/part.h"

namespace bb::replay {
namespace {

std::string part_name(const Part& p) {
  return "part " + std::to_string(p.info.shard.k) + "/" + std::to_string(p.info.shard.n) + " (" + p.file + ")";
}

std::string value_of(const RunIdentity& id, const std::string& what) {
  for (const auto& [w, v] : id)
    if (w == what) return v;
  return "(not recorded)";
}

// Parts of one run agree on everything that makes results comparable and on how the run was split.
void check_same_run(const Part& first, const Part& p) {
  for (const auto& [what, value] : first.info.identity) {  // in the order the first part lists them
    const std::string other = value_of(p.info.identity, what);
    if (other != value)
      throw MergeError(p.file + " is not a part of the same run as " + first.file + ": their " + what + " differs (" +
                       value + " in " + first.file + "; " + other + " in " + p.file + ")");
  }
  if (p.info.identity.size() != first.info.identity.size())
    throw MergeError(p.file + " is not a part of the same run as " + first.file + ": they record different settings");
  if (p.info.shard.n != first.info.shard.n)
    throw MergeError(p.file + " is part " + std::to_string(p.info.shard.k) + "/" + std::to_string(p.info.shard.n) +
                     ", " + first.file + " part " + std::to_string(first.info.shard.k) + "/" +
                     std::to_string(first.info.shard.n) + ": parts of a run split into a different number of parts");
  if (p.info.cases_total != first.info.cases_total || p.info.cases_hash != first.info.cases_hash)
    throw MergeError(p.file + " and " + first.file + " list different cases for the whole run (" +
                     std::to_string(p.info.cases_total) + " and " + std::to_string(first.info.cases_total) +
                     " cases): parts of different runs");
}

bool not_run(const NotJudged& n) { return n.reason == kNotRunReason; }

// What no case of the run covers (signatures not selected): the same in every part.
std::vector<NotJudged> uncovered(const Part& p) {
  std::vector<NotJudged> out;
  for (const auto& n : p.report.meta.not_replayed)
    if (!not_run(n)) out.push_back(n);
  return out;
}

bool same(const std::vector<NotJudged>& a, const std::vector<NotJudged>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const NotJudged& x, const NotJudged& y) {
    return x.op == y.op && x.reason == y.reason && x.calls == y.calls && x.device_us == y.device_us;
  });
}

// One part of each K of 0..N-1, each named where it is missing or given twice.
std::vector<const Part*> by_k(const std::vector<Part>& parts) {
  const size_t n = parts.front().info.shard.n;
  std::vector<const Part*> slot(n, nullptr);
  for (const auto& p : parts) {
    if (p.info.shard.k >= n)
      throw MergeError(p.file + ": part " + std::to_string(p.info.shard.k) + " of " + std::to_string(n) +
                       " (K counts from 0)");
    if (const Part* seen = slot[p.info.shard.k])
      throw MergeError(part_name(p) + " is given twice: " + seen->file + " and " + p.file);
    slot[p.info.shard.k] = &p;
  }
  std::string missing;
  for (size_t k = 0; k < n; ++k)
    if (!slot[k]) missing += (missing.empty() ? "" : ", ") + std::to_string(k) + "/" + std::to_string(n);
  if (!missing.empty())
    throw MergeError("missing part" + std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
                     " of the run (given: " + std::to_string(parts.size()) + " of " + std::to_string(n) + ")");
  return slot;
}

// Each part's cases into their places in the run's order; every case of the run from exactly one part.
std::vector<std::optional<CaseResult>> place_cases(const std::vector<const Part*>& parts, size_t total) {
  std::vector<const Part*> owner(total, nullptr);
  for (const Part* p : parts)
    for (size_t pos : p->info.assigned) {
      if (pos >= total)
        throw MergeError(p->file + ": case " + std::to_string(pos) + " of a run of " + std::to_string(total));
      if (owner[pos])
        throw MergeError("case " + std::to_string(pos) + " is in " + owner[pos]->file + " and in " + p->file +
                         ": parts of different splits");
      owner[pos] = p;
    }
  for (size_t pos = 0; pos < total; ++pos)
    if (!owner[pos]) throw MergeError("case " + std::to_string(pos) + " of the run is in no part");
  std::vector<std::optional<CaseResult>> cases(total);
  for (const Part* p : parts) {
    if (p->info.positions.size() != p->report.cases.size()) throw MergeError(p->file + ": malformed part");
    for (size_t i = 0; i < p->report.cases.size(); ++i) {
      const size_t pos = p->info.positions[i];
      if (pos >= total || owner[pos] != p || cases[pos])
        throw MergeError(p->file + ": a result for case " + std::to_string(pos) +
                         (pos < total && cases[pos] ? " twice" : ", which is not one of this part's cases"));
      cases[pos] = p->report.cases[i];
    }
    if (p->report.meta.interrupted.empty() && p->report.cases.size() != p->info.assigned.size())
      throw MergeError(p->file + ": " + std::to_string(p->report.cases.size()) + " results for " +
                       std::to_string(p->info.assigned.size()) + " cases, and the part says it was not interrupted");
  }
  return cases;
}

// The first part's meta, with what differs between parts said: the earliest start, each part's timing
// where it differs from the first's, every interruption.
ReportMeta merged_meta(const std::vector<const Part*>& parts) {
  ReportMeta m = parts.front()->report.meta;
  m.not_replayed = uncovered(*parts.front());
  std::string interrupted;
  for (const Part* p : parts) {
    const ReportMeta& pm = p->report.meta;
    m.date = std::min(m.date, pm.date);
    if (pm.timing != parts.front()->report.meta.timing) m.timing += "; " + part_name(*p) + ": " + pm.timing;
    if (!pm.interrupted.empty())
      interrupted += (interrupted.empty() ? "" : "; ") + part_name(*p) + " " + pm.interrupted;
    for (const auto& n : pm.not_replayed)
      if (not_run(n)) m.not_replayed.push_back(n);
  }
  m.interrupted = interrupted;
  m.timing += "; run in " + std::to_string(parts.size()) + " parts (--shard), merged";
  return m;
}

}  // namespace

Report merge_parts(const std::vector<Part>& parts) {
  if (parts.empty()) throw MergeError("no part to merge");
  for (const auto& p : parts) {
    check_same_run(parts.front(), p);
    if (!same(uncovered(p), uncovered(parts.front())))
      throw MergeError(p.file + " and " + parts.front().file +
                       " disagree on the signatures no case covers: parts of different runs");
  }
  const std::vector<const Part*> ordered = by_k(parts);
  Report r;
  r.meta = merged_meta(ordered);
  for (auto& c : place_cases(ordered, parts.front().info.cases_total))
    if (c) r.cases.push_back(std::move(*c));
  return r;
}

}  // namespace bb::replay
