// bbreplay merge PART.json... [--json F] [--csv F] [--markdown F]: the report of a run made in parts
// (bbreplay --shard K/N). Exit codes as bbreplay's: 0 every checked case passed, 1 some case failed,
// crashed or timed out (or a part was interrupted), 2 bad parts, parts of different runs, a missing or
// duplicated part, or a failed write; then nothing is written.
#include <CLI/CLI.hpp>

#include <iostream>

#include "replay/parts/part.h"
#include "replay/report/report_writers.h"
#include "tracer/format/atomic_file.h"

namespace bb::replay {

int merge_main(int argc, char** argv) {
  CLI::App app{"bbreplay merge: the report of a run made in parts (bbreplay --shard K/N --json PART.json)",
               "bbreplay merge"};
  std::vector<std::string> files;
  std::string json, csv, markdown;
  app.add_option("parts", files, "the JSON reports of the parts 0/N .. N-1/N, one each, in any order")->required();
  app.add_option("--json", json, "write the merged report as JSON");
  app.add_option("--csv", csv, "write the merged report as CSV (one row per case)");
  app.add_option("--markdown", markdown, "write the merged report as Markdown");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    std::vector<Part> parts;
    for (const auto& f : files) parts.push_back(load_part(f));
    const Report report = merge_parts(parts);
    // Every output made before any is written; each written whole or not at all.
    std::vector<std::pair<std::string, std::string>> outputs;
    for (const auto& [path, format] : {std::pair{json, "json"}, {csv, "csv"}, {markdown, "markdown"}})
      if (!path.empty()) outputs.emplace_back(path, make_writer(format)->render(report));
    for (const auto& [path, text] : outputs)
      if (std::string why = format::write_file_atomic(path, text); !why.empty()) throw MergeError(why);
    std::cout << make_writer("console")->render(report);
    return report.all_passed() ? 0 : 1;
  } catch (const MergeError& e) {
    std::cerr << "bbreplay merge: " << e.what() << "\n";
  }
  return 2;
}

}  // namespace bb::replay
