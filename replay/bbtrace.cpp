// bbtrace: look at a trace written by the preload.
//   bbtrace summary TRACE [--top N] [--signatures N]
// Exit codes: 0 ok, 2 usage or input error (file:line:column for a bad trace).
#include <CLI/CLI.hpp>

#include <iostream>

#include "replay/trace_summary.h"
#include "tracer/trace_yaml.h"

int main(int argc, char** argv) {
  CLI::App app{"bbtrace: inspect bbshim traces"};
  app.require_subcommand(1);
  std::string path;
  bb::replay::SummaryOptions options;
  CLI::App* summary = app.add_subcommand("summary", "print what a trace holds: ops, calls, signatures");
  summary->add_option("trace", path, "trace file written by the preload (bbtrace.yaml)")->required();
  summary->add_option("--top", options.top, "how many ops to list, by calls")->capture_default_str();
  summary->add_option("--signatures", options.signatures, "also list this many signatures, by calls")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    bb::trace::Trace t = bb::trace::load_trace(path);
    bb::replay::print_summary(t, path, options, std::cout);
  } catch (const bb::trace::FormatError& e) {
    std::cerr << "bbtrace: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
