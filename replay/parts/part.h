// A part of a bbreplay run (--shard K/N) and the merge of a run's parts into the report one run would
// have made (bbreplay merge; docs/replay.md, "Parts of a run"). No torch dependency.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "replay/report/report.h"
#include "replay/parts/shard.h"

namespace bb::replay {

// Of the "part" object of a part's JSON report (2: its results are the report's cases, case_json.h).
inline constexpr int kPartVersion = 2;
// The reason bbreplay gives a signature whose traced case did not run because the run was stopped.
inline constexpr const char* kNotRunReason = "not run (interrupted)";

// What makes the results of two parts parts of one run, as (what, value) pairs in a fixed order: the
// tool and torch versions, the trace's and the backend folder's content, the seed, every option that
// changes a result. Parts whose identities differ are never merged.
using RunIdentity = std::vector<std::pair<std::string, std::string>>;

// "content hash <hex>" of a file's bytes; of every file under a folder, by relative path and content
// (hidden entries and __pycache__ left out). Throw std::runtime_error when something cannot be read.
std::string hash_file(const std::string& path);
std::string hash_folder(const std::string& dir);

struct PartInfo {
  ShardSpec shard;
  RunIdentity identity;
  size_t cases_total = 0;          // cases of the whole run
  std::string cases_hash;          // of the whole run's case list
  std::vector<size_t> assigned;    // this part's cases: positions in the whole run's list, ascending
  std::vector<size_t> positions;   // the position of each case of the part's report, in its order
  uint64_t estimated_cost_us = 0;  // of this part (shard.h)
};

// The part's JSON report: the report as --json writes it, with a "part" object holding what merge needs.
std::string render_part(const Report& report, const PartInfo& info);

// Bad parts, parts of different runs, missing or duplicated parts: what() names the file.
class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Part {
  std::string file;
  PartInfo info;
  Report report;  // meta.not_replayed as the part wrote it
};

// `text` is the content of `file`. Throws MergeError.
Part parse_part(const std::string& text, const std::string& file);
Part load_part(const std::string& file);

// The report of the whole run: every case in the run's order, from the part that ran it. Throws
// MergeError unless the parts are one of each of 0/N .. N-1/N of one run.
Report merge_parts(const std::vector<Part>& parts);

// `bbreplay merge PART.json... [--json F] [--csv F] [--markdown F]` (argv[0] is "merge").
int merge_main(int argc, char** argv);

}  // namespace bb::replay
