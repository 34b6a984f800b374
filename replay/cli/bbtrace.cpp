// bbtrace: look at and convert traces.
//   bbtrace summary TRACE [--top N] [--signatures N] [--backend DIR]
//   bbtrace convert IN OUT [--to yaml|torchbench]
//   bbtrace merge TRACE... -o OUT [--keep-devices]   (tracer/format/trace_merge.h)
// TRACE/IN may be a bbshim trace (YAML) or a TorchBench operator-input log; the format is read from
// the content. Exit codes: 0 ok, 2 usage or input error (file:line:column for a bad trace) or a failed
// write. A tool above the trace format and bbreplay's torch-free coverage preview (coverage_preview.h):
// it links bb_trace_format, bb_judgeable and bb_atomic_file, no torch.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "replay/judgeable/coverage_preview.h"
#include "tracer/format/atomic_file.h"
#include "tracer/format/tool_cli.h"
#include "tracer/format/torchbench.h"
#include "tracer/format/trace_merge.h"
#include "tracer/format/trace_summary.h"
#include "tracer/format/trace_yaml.h"

namespace {

int convert(const std::string& in, const std::string& out, std::string to) {
  bb::trace::Trace t = bb::trace::load_any_trace(in);
  if (to.empty()) to = out.size() > 4 && out.compare(out.size() - 4, 4, ".txt") == 0 ? "torchbench" : "yaml";
  std::string text;
  if (to == "torchbench") {
    auto tb = bb::trace::to_torchbench(t);
    text = tb.text;
    if (tb.skipped)
      std::cerr << "bbtrace: " << tb.skipped
                << " signatures left out: symbolic shapes, sparse tensors, storage offsets or values (generators, "
                   "complex) the TorchBench format cannot express\n";
  } else {
    text = bb::trace::to_yaml(t);
  }
  std::ofstream f(out, std::ios::binary);
  f << text;
  f.close();  // most of a write fails only here, when the buffer goes out (a full disk)
  if (!f) {
    std::cerr << "bbtrace: cannot write " << out << ": " << std::strerror(errno) << "\n";
    return 2;
  }
  std::cerr << "bbtrace: wrote " << out << " (" << t.ops.size() << " signatures, " << to << ")\n";
  return 0;
}

int merge(const std::vector<std::string>& in, const std::string& out, bool keep_devices) {
  std::vector<bb::trace::Trace> traces;
  for (const auto& f : in) traces.push_back(bb::trace::load_any_trace(f));
  bb::trace::Trace t;
  try {
    t = bb::trace::merge_traces(traces, in, {!keep_devices});
  } catch (const bb::trace::TraceMergeError& e) {
    std::cerr << "bbtrace merge: " << e.what() << "\n";
    return 2;
  }
  if (std::string why = bb::format::write_file_atomic(out, bb::trace::to_yaml(t)); !why.empty()) {
    std::cerr << "bbtrace: " << why << "\n";
    return 2;
  }
  std::cerr << "bbtrace: wrote " << out << " (" << in.size() << " traces, " << t.ops.size() << " signatures)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bbtrace: inspect and convert bbshim traces and TorchBench operator-input logs"};
  app.require_subcommand(1);
  std::string path, out, to, backend;
  bb::trace::SummaryOptions options;
  CLI::App* summary = app.add_subcommand("summary", "print what a trace holds: ops, calls, signatures");
  summary->add_option("trace", path, "bbshim trace (bbtrace.yaml) or TorchBench operator-input log")->required();
  summary->add_option("--top", options.top, "how many ops to list, by calls")->capture_default_str();
  summary->add_option("--signatures", options.signatures, "also list this many signatures, by calls")
      ->capture_default_str();
  summary
      ->add_option("--backend", backend,
                   "also say what share of the trace this backend folder would have "
                   "judged, and what not and why (before any replay)")
      ->check(CLI::ExistingDirectory);
  CLI::App* conv = app.add_subcommand("convert", "convert between bbshim YAML and TorchBench operator-input logs");
  conv->add_option("in", path, "input: either format, recognized by content")->required();
  conv->add_option("out", out, "output file")->required();
  conv->add_option("--to", to, "output format (default: torchbench for .txt, else yaml)")
      ->check(CLI::IsMember({"yaml", "torchbench"}));
  std::vector<std::string> inputs;
  bool keep_devices = false;
  CLI::App* mrg = app.add_subcommand("merge", "merge the traces of a program's processes (torchrun: one per rank)");
  mrg->add_option("traces", inputs, "the traces, e.g. bbtrace.rank*.yaml")->required();
  mrg->add_option("-o,--output", out, "the merged trace (YAML)")->required();
  mrg->add_flag("--keep-devices", keep_devices,
                "keep device indices as traced (default: renumbered per process, rank R's cuda:R becomes cuda:0)");
  if (auto status = bb::tool::parse(app, argc, argv)) return *status;
  return bb::tool::run("bbtrace", [&] {
    if (conv->parsed()) return convert(path, out, to);
    if (mrg->parsed()) return merge(inputs, out, keep_devices);
    const bb::trace::Trace trace = bb::trace::load_any_trace(path);
    bb::trace::print_summary(trace, path, options, std::cout);
    if (!backend.empty()) bb::replay::print_coverage_preview(trace, backend, std::cout);
    return 0;
  });
}
