// bbreplay: check and benchmark kernels on the calls a program really made (docs/replay.md).
//   bbreplay TRACE [--backend DIR] [--policy F] [--ops LIST] [--device cpu|cuda] [--seed N]
//            [--variants LIST] [--check-only|--perf-only] [--json F] [--csv F] [--markdown F] [--shard K/N]
//            [--write-policy F [--min-speedup X]] ...
//   bbreplay merge PART.json... [--json F] [--csv F] [--markdown F]   (replay/cli/merge_cli.cpp)
// Exit codes: 0 every checked case passed, 1 some case failed, crashed or timed out, 2 usage or input
// error (file:line:column for a bad trace or policy).
#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "replay/cli/bbreplay_app.h"
#include "replay/cli/written_policy.h"
#include "replay/workers/isolation.h"
#include "replay/cli/kernel_worker.h"
#include "replay/workers/memory.h"
#include "replay/report/report_writers.h"
#include "replay/parts/shard.h"
#include "tracer/format/atomic_file.h"
#include "tracer/format/tool_cli.h"
#include "tracer/format/trace_summary.h"

namespace {

using namespace bb;
using namespace bb::replay;
using namespace bb::replay::app;

// Written whole or not at all.
void write_file(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  if (std::string why = format::write_file_atomic(path, text); !why.empty()) throw Usage(why);
}

// torch's CUDA kernels and hooks live in libtorch_cuda, which nothing here links: loaded when this
// torch has it, so that --device cuda finds the CUDA dispatch keys (a CPU-only torch has none).
void load_torch_cuda() {
  const std::string lib = std::string(BB_TORCH_LIB_DIR) + "/libtorch_cuda.so";
  if (::access(lib.c_str(), R_OK) == 0 && !::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL))
    std::cerr << "bbreplay: cannot load " << lib << ": " << ::dlerror() << " (CUDA unavailable)\n";
}

// A sealed copy of a file (a memfd nobody can change, open in this process, inherited by its reference
// workers): they read the trace and policy bbreplay read, whatever happens to the files meanwhile.
int sealed_copy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int fd = ::memfd_create("bbreplay-input", MFD_ALLOW_SEALING);
  if (fd < 0) throw Usage("memfd_create: " + std::string(strerror(errno)));
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    throw Usage("cannot seal a copy of " + path + ": " + strerror(errno));
  return fd;
}

// 64 bits from the OS: the run's secret seed, unless --seed gave one.
uint64_t secret_seed() {
  uint64_t s = 0;
  if (::getrandom(&s, sizeof s, 0) != static_cast<ssize_t>(sizeof s)) throw Usage("getrandom failed");
  return s;
}

// The reference workers' command: bbreplay's own, without --seed (the seed travels on their stdin), with
// the sealed copies of the trace and policy, and --worker.
std::vector<std::string> reference_argv(const std::vector<std::string>& args, int trace_fd, int policy_fd) {
  std::vector<std::string> out{exe_path()};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--seed") {
      ++i;
      continue;
    }
    if (a.rfind("--seed=", 0) == 0) continue;
    out.push_back(a);
  }
  out.push_back("--worker");
  out.push_back("--trace-fd=" + std::to_string(trace_fd));
  if (policy_fd >= 0) out.push_back("--policy-fd=" + std::to_string(policy_fd));
  return out;
}

// The command line, blanked where /proc/PID/cmdline shows it (a kernel's process sees that of every process
// of its user where namespaces are refused: --seed and --perf-only are not for it to read); `args` keeps it.
void hide_command_line(int argc, char** argv, std::vector<std::string>* args) {
  args->assign(argv, argv + argc);
  for (int i = 1; i < argc; ++i) std::memset(argv[i], 0, std::strlen(argv[i]));
}

// Every process this run started that is still alive (what a kernel's process detached, reparented
// here) is killed before a report is written: nothing that ran a kernel outlives bbreplay's reports.
void end_every_process() {
  for (int k = 0; k < 100 && kill_strays(::getpid(), {}) > 0; ++k) {
  }
}

}  // namespace

// The whole of bbreplay; replay/cli/bbreplay_main.cpp is its executable, and a Python host calls it too.
extern "C" __attribute__((visibility("default"))) int bbreplay_main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "merge") return merge_main(argc - 1, argv + 1);  // (no torch needed)
  load_torch_cuda();
  if (argc > 1 && std::string(argv[1]) == "--worker-kernel") return kernel_worker_main();
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
  app.add_option_function<uint64_t>(
      "--seed", [&o](const uint64_t& v) { o.seed = v; },
      "seed of every input (default: a secret drawn from the OS, which the report records; --seed with it reproduces "
      "the run)");
  app.add_option(
      "--variants", o.variants,
      "comma-separated: traced, noncontiguous, special-values, large-values, empty, scalar, odd-size (default all)");
  auto* check_only = app.add_flag("--check-only", o.check_only, "check correctness, do not time");
  app.add_flag("--perf-only", o.perf_only,
               "time, with only the quick checks: every call's results are still compared with native's (no second "
               "input set, no unwritten-output run)")
      ->excludes(check_only);
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
  app.add_option("--write-policy", o.write_policy,
                 "write the routing policy this judgement earns: the ops whose every judged case passed (with "
                 "--min-speedup, and were that much faster), each as the judging policy wrote it");
  app.add_option("--min-speedup", o.min_speedup,
                 "with --write-policy: route only ops at least this many times native's speed (the geometric mean "
                 "over their cases)")
      ->check(CLI::PositiveNumber);
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
  app.add_option("--isolation", o.isolation,
                 "how the kernel's processes are kept from bbreplay's: auto (namespaces where the host allows them, "
                 "else a subreaper), namespaces, subreaper")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "namespaces", "subreaper"}));
  app.add_flag("--quiet", o.quiet,
               "no progress on stderr (by default a line updated in place on a terminal, else a line every 10 s)");
  app.add_option("--progress-every", o.progress_every,
                 "seconds between progress lines when stderr is not a terminal (0: one before every case)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--list", o.list, "list the cases and exit");
  app.add_flag("--worker", o.worker, "internal: serve cases on stdin")->group("");
  app.add_flag("--native-only", o.native_only, "internal: a worker whose kernel process loads no backend")->group("");
  app.add_option("--trace-fd", o.trace_fd, "internal: the trace, sealed")->group("");
  app.add_option("--policy-fd", o.policy_fd, "internal: the policy, sealed")->group("");
  if (auto status = tool::parse(app, argc, argv)) return *status;
  std::vector<std::string> args;
  hide_command_line(argc, argv, &args);
  return tool::run("bbreplay", [&] {
    if (o.worker) return worker_main(o);
    warn_each_once();  // (asking native on meta tensors which variants apply warns too)
    Setup s = set_up(o, false);
    if (s.cases.empty()) throw Usage("no case to run: no op of the trace matches --ops");
    if (!o.write_policy.empty() && !s.has_backend)
      throw Usage("--write-policy needs a backend (--backend DIR): a self-check earns no routing");
    if (!o.write_policy.empty() && !o.shard.empty())
      throw Usage("--write-policy judges the whole run: not with --shard");
    if (o.min_speedup && o.write_policy.empty()) throw Usage("--min-speedup goes with --write-policy F");
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
    ::prctl(PR_SET_DUMPABLE, 0);  // (no other process of this user may read or write this one's memory)
    become_subreaper();           // (what a kernel's process detaches ends up here, to be killed)
    s.run.seed = o.seed ? *o.seed : secret_seed();
    Launch launch;
    launch.argv = reference_argv(args, sealed_copy(o.trace), o.policy.empty() ? -1 : sealed_copy(o.policy));
    launch.greeting = std::to_string(s.run.seed);
    // (a backend named by the policy is relative to the policy's file, which the workers read from a copy)
    if (o.backend.empty() && s.has_backend) launch.argv.push_back("--backend=" + s.backend.dir);
    const auto slots = worker_slots(o, s);
    // Resolved once here, so that every worker has the same limit however much is free when it starts.
    if (!o.worker_memory) o.worker_memory = available_host_bytes() / 4 * 3 / slots.size();
    launch.argv.push_back("--worker-memory=" + std::to_string(*o.worker_memory));
    launch.native_argv = launch.argv;
    launch.native_argv.push_back("--native-only");
    stop_on_signals();
    Report report = run_all(o, s, launch, slots, part ? &part->positions : nullptr);
    end_every_process();
    std::cout << make_writer("console")->render(report);
    if (part)
      for (size_t& p : part->positions) p = part->assigned[p];  // positions in the whole run's case list
    write_file(o.json, part ? render_part(report, *part) : make_writer("json")->render(report));
    write_file(o.csv, make_writer("csv")->render(report));
    write_file(o.markdown, make_writer("markdown")->render(report));
    if (!o.write_policy.empty())
      write_file(o.write_policy, written_policy(report, s.backend.dir, s.policy_text, o.min_speedup));
    return report.all_passed() ? 0 : 1;
  });
}
