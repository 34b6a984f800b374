// bbreplay: check and benchmark kernels on the calls a program really made (docs/replay.md).
//   bbreplay TRACE [--backend DIR] [--policy F] [--ops LIST] [--device cpu|cuda] [--seed N]
//            [--variants LIST] [--check-only|--perf-only] [--json F] [--csv F] [--markdown F] [--shard K/N] ...
//   bbreplay merge PART.json... [--json F] [--csv F] [--markdown F]   (replay/merge_cli.cpp)
// Exit codes: 0 every checked case passed, 1 some case failed, crashed or timed out, 2 usage or input
// error (file:line:column for a bad trace or policy).
#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "backends/python_kernels.h"
#include "replay/bbreplay_app.h"
#include "replay/memory.h"
#include "replay/report_writers.h"
#include "replay/shard.h"
#include "shim/atomic_file.h"
#include "tracer/format/tool_cli.h"
#include "tracer/format/trace_summary.h"

namespace {

using namespace bb;
using namespace bb::replay;
using namespace bb::replay::app;

// Written whole or not at all.
void write_file(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  if (std::string why = shim::write_file_atomic(path, text); !why.empty()) throw Usage(why);
}

// torch's CUDA kernels and hooks live in libtorch_cuda, which nothing here links: loaded when this
// torch has it, so that --device cuda finds the CUDA dispatch keys (a CPU-only torch has none).
void load_torch_cuda() {
  const std::string lib = std::string(BB_TORCH_LIB_DIR) + "/libtorch_cuda.so";
  if (::access(lib.c_str(), R_OK) == 0 && !::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL))
    std::cerr << "bbreplay: cannot load " << lib << ": " << ::dlerror() << " (CUDA unavailable)\n";
}

}  // namespace

// The whole of bbreplay; replay/bbreplay_main.cpp is its executable, and a Python host calls it too.
extern "C" __attribute__((visibility("default"))) int bbreplay_main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "merge") return merge_main(argc - 1, argv + 1);  // (no torch needed)
  load_torch_cuda();
  Options o;
  CLI::App app{
      "bbreplay: check and benchmark kernels on the calls a program really made\n"
      "  bbreplay merge PART.json... merges the parts of a run made with --shard (bbreplay merge --help)"};
  app.add_option("trace", o.trace, "bbshim trace (YAML) or TorchBench operator-input log")->required();
  app.add_option("--backend", o.backend,
                 "backend folder with the kernels under test (default: native against native, a self-check)");
  app.add_option("--policy", o.policy, "routing policy: its tolerances (and backend, if it names one)");
  app.add_option("--ops", o.ops,
                 "ops to replay, comma-separated: full overload names (relu, add.Tensor, aten::mm), * and ? as "
                 "wildcards (add.*, *_backward); default all");
  app.add_option("--device", o.device, "cpu or cuda (default: cuda when torch sees one)");
  app.add_option("--seed", o.seed, "seed of every input")->capture_default_str();
  app.add_option(
      "--variants", o.variants,
      "comma-separated: traced, noncontiguous, special-values, large-values, empty, scalar, odd-size (default all)");
  auto* check_only = app.add_flag("--check-only", o.check_only, "check correctness, do not time");
  app.add_flag("--perf-only", o.perf_only, "time, do not compare results")->excludes(check_only);
  app.add_flag("--strict-strides", o.strict_strides,
               "fail a functional op's result whose values match native's but whose strides differ (default: "
               "passes with a note; in-place, out= and view results are always compared strictly)");
  // (0 repetitions made the self-check segfault; nan, inf and negative seconds timed every case out)
  const CLI::Validator positive_seconds(
      [](std::string& v) {
        const double x = std::strtod(v.c_str(), nullptr);
        return std::isfinite(x) && x > 0 && x <= 1e6 ? std::string() : "expected seconds in (0, 1e6], got " + v;
      },
      "SECONDS");
  app.add_option("--repetitions", o.repetitions,
                 "timed runs per kernel and case (fewer once --precision is met; up to 4x as many while a side's "
                 "times are unstable)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--precision", o.precision,
                 "stop repeating a case once each side's median is known to within this fraction (half-width of "
                 "its 95% confidence interval; 0: always make --repetitions)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--budget", o.budget, "seconds of timing per case, roughly")
      ->capture_default_str()
      ->check(positive_seconds);
  app.add_option("--timeout", o.timeout, "seconds before a case is declared hung")
      ->capture_default_str()
      ->check(positive_seconds);
  app.add_option("--gpus", o.gpus,
                 "CUDA devices to spread the cases over, one worker pinned to each: all, or indices (0,2,3); "
                 "default: one worker on the first");
  app.add_option("--jobs", o.jobs,
                 "worker processes at once on one device, for --check-only (timed cases: --gpus, one worker per GPU)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  // Sizes: 123, 512K, 1.5G, 2T (binary units); 0: no limit.
  auto bytes_option = [&app](const char* name, std::optional<uint64_t>& into, const char* help) {
    app.add_option_function<std::string>(
           name,
           [&into, name](const std::string& v) {
             into = parse_bytes(v);
             if (!into) throw CLI::ValidationError(name, "expected a size such as 512M or 2G, got " + v);
           },
           help)
        ->type_name("BYTES")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  bytes_option("--max-case-bytes", o.max_case_bytes,
               "skip cases whose inputs and results take more (512M, 2G; 0: no limit; default: an eighth of the "
               "memory free to a worker, on CUDA of the device's free memory too)");
  bytes_option("--worker-memory", o.worker_memory,
               "memory a worker process may allocate on the host; beyond it an allocation fails, and so does the "
               "case (0: no limit; default: three quarters of the available memory, shared among the workers)");
  app.add_option("--json", o.json, "write the report as JSON");
  app.add_option("--csv", o.csv, "write the report as CSV (one row per case)");
  app.add_option("--markdown", o.markdown, "write the report as Markdown");
  app.add_option("--shard", o.shard,
                 "run part K of N (K from 0: $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT of an array started at 0), "
                 "cases balanced by expected cost; --json writes the part for bbreplay merge")
      ->type_name("K/N")
      ->check([](const std::string& v) {
        try {
          parse_shard(v);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  app.add_flag("--list", o.list, "list the cases and exit");
  app.add_flag("--worker", o.worker, "internal: serve cases on stdin")->group("");
  if (auto status = tool::parse(app, argc, argv)) return *status;
  return tool::run("bbreplay", [&] {
    if (!backends::python_in_process()) {
      std::string dir = o.backend;
      if (dir.empty() && !o.policy.empty()) dir = policy::load_policy(o.policy).backend.value_or("");
      if (!dir.empty() && has_python_kernels(dir)) {
        const char* host = std::getenv("BB_REPLAY_PYTHON_HOST");
        if (host && std::to_string(::getpid()) == host)
          throw Usage(BB_PYTHON " runs bbreplay without Python's symbols visible: cannot run Python kernels");
        throw Usage(run_in_python(argc, argv));
      }
    }
    if (o.worker) return worker_main(o);
    Setup s = set_up(o, false);
    if (s.cases.empty()) throw Usage("no case to run: no op of the trace matches --ops");
    std::optional<PartInfo> part;
    if (!o.shard.empty()) {
      if (o.json.empty() && !o.list) throw Usage("--shard needs --json F: the part's results, for bbreplay merge");
      part = take_shard(o, s);
    }
    if (o.list) {
      for (size_t i = 0; i < s.cases.size(); ++i)
        std::cout << s.trace.ops[s.cases[i].entry].op << "  (" << trace::signature_text(s.trace.ops[s.cases[i].entry])
                  << ")  " << s.cases[i].variant << "\n";
      return 0;
    }
    std::vector<std::string> worker_argv(argv, argv + argc);
    worker_argv[0] = exe_path();
    worker_argv.push_back("--worker");
    const auto slots = worker_slots(o, s);
    // Resolved once here, so that every worker has the same limit however much is free when it starts.
    if (!o.worker_memory) o.worker_memory = available_host_bytes() / 4 * 3 / slots.size();
    worker_argv.push_back("--worker-memory=" + std::to_string(*o.worker_memory));
    stop_on_signals();
    Report report = run_all(o, s, worker_argv, slots, part ? &part->positions : nullptr);
    std::cout << make_writer("console")->render(report);
    if (part)
      for (size_t& p : part->positions) p = part->assigned[p];  // positions in the whole run's case list
    write_file(o.json, part ? render_part(report, *part) : make_writer("json")->render(report));
    write_file(o.csv, make_writer("csv")->render(report));
    write_file(o.markdown, make_writer("markdown")->render(report));
    return report.all_passed() ? 0 : 1;
  });
}
