// The preload's plumbing that needs no running program: settings, output names, atomic writes, the
// trace and timeline built from the tracer's data.
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "catch.h"
#include "shim/config.h"
#include "shim/output_path.h"
#include "shim/settings.h"
#include "shim/trace_writer.h"
#include "sample_trace.h"
#include "tracer/devtime/collector.h"
#include "tracer/names.h"
#include "tracer/format/atomic_file.h"
#include "tracer/format/trace_model.h"
#include "tracer/format/trace_yaml.h"

using namespace bb::shim;
using bb::format::write_file_atomic;

namespace {

Config config_of(std::map<std::string, std::string> env) {
  return config_from_env([env](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string temp_dir() {
  char tmpl[] = "/tmp/bbshim-test-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("no configuration means: trace to bbtrace.yaml, quiet, periodic writes") {
  Config c = config_of({});
  CHECK_FALSE(c.disabled);
  CHECK(c.trace);
  CHECK(c.trace_path.empty());
  CHECK(c.log_level == bb::log::Level::Warn);
  CHECK(c.flush_seconds == 10.0);
  CHECK(c.problems.empty());
}

TEST_CASE("settings are read from BB_ variables") {
  Config c = config_of({{"BB_DISABLE", "1"},
                        {"BB_TRACE", "/x/t.yaml"},
                        {"BB_LOG", "debug"},
                        {"BB_FLUSH_SECONDS", "0.5"},
                        {"BB_MAX_SIGNATURES", "10"},
                        {"BB_INT_RANGES", "0"}});
  CHECK(c.disabled);
  CHECK(c.trace_path == "/x/t.yaml");
  CHECK(c.log_level == bb::log::Level::Debug);
  CHECK(c.flush_seconds == 0.5);
  CHECK(c.tracer.max_signatures == 10);
  CHECK_FALSE(c.tracer.int_ranges);
  CHECK_FALSE(config_of({{"BB_DISABLE", "0"}}).disabled);
  CHECK_FALSE(config_of({{"BB_TRACE", "off"}}).trace);
  CHECK(c.device_timing.enabled);
  CHECK(c.timeline.empty());
  Config d = config_of({{"BB_DEVICE_TIME", "off"}, {"BB_TIMELINE", "/x/tl.json"}, {"BB_TIMELINE_MAX_EVENTS", "5"}});
  CHECK_FALSE(d.device_timing.enabled);
  CHECK(d.timeline == "/x/tl.json");
  CHECK(d.device_timing.timeline_max_events == 5);
  CHECK(config_of({}).trace_sampling.every == 0);
  CHECK(config_of({{"BB_TRACE_SAMPLE", "16"}}).trace_sampling.every == 16);
}

TEST_CASE("invalid settings fall back to defaults and say so") {
  Config c = config_of({{"BB_FLUSH_SECONDS", "soon"}, {"BB_LOG", "loud"}, {"BB_MAX_SIGNATURES", "0"}});
  CHECK(c.flush_seconds == 10.0);
  CHECK(c.log_level == bb::log::Level::Warn);
  CHECK(c.tracer.max_signatures == 100000);
  REQUIRE(c.problems.size() == 3);
  CHECK(c.problems[0] == "BB_LOG='loud' is not off, warn, info or debug (or 0 to 3); using warn");
  CHECK(c.problems[1].rfind("BB_FLUSH_SECONDS='soon' is not a number in [", 0) == 0);
}

TEST_CASE("sampled device timing: ON/PERIOD in milliseconds, checked, off by default") {
  Config none = config_of({});
  CHECK(none.device_timing.sample_period_ms == 0);
  Config c = config_of({{"BB_DEVICE_TIME_SAMPLE", "10/100"}});
  CHECK(c.problems.empty());
  CHECK(c.device_timing.sample_on_ms == 10);
  CHECK(c.device_timing.sample_period_ms == 100);
  CHECK(config_of({{"BB_DEVICE_TIME_SAMPLE", "off"}}).device_timing.sample_period_ms == 0);
  for (const char* bad : {"100/10", "10/10", "0/100", "10/", "10/100ms", "ten", "5/70000"}) {
    Config b = config_of({{"BB_DEVICE_TIME_SAMPLE", bad}});
    CHECK(b.device_timing.sample_period_ms == 0);
    REQUIRE(b.problems.size() == 1);
    CHECK(b.problems[0] == std::string("BB_DEVICE_TIME_SAMPLE='") + bad +
                               "' is not ON/PERIOD in milliseconds with 0 < ON < PERIOD <= 60000 (e.g. 10/100), "
                               "or off; using off");
  }
  const std::string dir = temp_dir();
  std::ofstream(dir + "/s.yaml") << "device_time_sample: 20/1000\n";
  Config f = config_of({{"BB_CONFIG", dir + "/s.yaml"}});
  CHECK(f.problems.empty());
  CHECK(f.device_timing.sample_on_ms == 20);
  CHECK(f.device_timing.sample_period_ms == 1000);
  CHECK(config_of({{"BB_CONFIG", dir + "/s.yaml"}, {"BB_DEVICE_TIME_SAMPLE", "off"}}).device_timing.sample_period_ms ==
        0);
  std::ofstream(dir + "/bad.yaml") << "log: info\ndevice_time_sample: 1000/20\n";
  Config g = config_of({{"BB_CONFIG", dir + "/bad.yaml"}});
  REQUIRE(g.problems.size() == 1);
  CHECK(g.problems[0].find("bad.yaml:2:21: device_time_sample '1000/20' is not ON/PERIOD") != std::string::npos);
}

TEST_CASE("a config file holds the same settings; the environment wins") {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/bb.yaml") << "trace: out/t.yaml\nlog: info\nflush_seconds: 2.5\nbackend: kernels\n"
                                     "summary: /tmp/s.txt\npolicy:\n  version: 1\n  ops: {}\n";
  Config c = config_of({{"BB_CONFIG", dir + "/bb.yaml"}});
  CHECK(c.problems.empty());
  CHECK(c.trace_path == dir + "/out/t.yaml");  // relative to the file
  CHECK(c.log_level == bb::log::Level::Info);
  CHECK(c.flush_seconds == 2.5);
  CHECK(c.backend == dir + "/kernels");
  CHECK(c.summary == "/tmp/s.txt");
  CHECK(c.policy == dir + "/bb.yaml");  // inline: the policy section of this file
  CHECK(c.policy_section == "policy");
  Config e = config_of({{"BB_CONFIG", dir + "/bb.yaml"}, {"BB_LOG", "off"}, {"BB_POLICY", "/p.yaml"}});
  CHECK(e.log_level == bb::log::Level::Off);
  CHECK(e.policy == "/p.yaml");
  CHECK(e.policy_section.empty());
}

TEST_CASE("a broken config file is reported with its position and ignored") {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/bb.yaml") << "log: info\nflush_secnds: 3\n";
  Config c = config_of({{"BB_CONFIG", dir + "/bb.yaml"}});
  REQUIRE(c.problems.size() == 1);
  CHECK(c.problems[0] == "config error: " + dir +
                             "/bb.yaml:2:1: unknown key 'flush_secnds' (expected disable, "
                             "trace, log, flush_seconds, max_signatures, int_ranges, device_time, device_time_calls, "
                             "device_time_refresh, device_time_sample, trace_sample, timeline, "
                             "timeline_max_events, "
                             "backend, policy, summary); the file "
                             "is ignored");
  CHECK(c.log_level == bb::log::Level::Warn);  // nothing from the file was used
  std::ofstream(dir + "/bad.yaml") << "log: loud\n";
  CHECK(config_of({{"BB_CONFIG", dir + "/bad.yaml"}})
            .problems[0]
            .find("bad.yaml:1:6: log 'loud' is not off, warn, info "
                  "or debug") != std::string::npos);
  CHECK(config_of({{"BB_CONFIG", "/nonexistent.yaml"}}).problems[0] ==
        "config error: /nonexistent.yaml:0:0: cannot open file; the file is ignored");
}

// README.md's settings table (its rows "| `BB_X=value` | what it does |") says what shim/settings.cpp
// declares, and nothing else: each setting's row word for word, the BB_CONFIG row names every key.
TEST_CASE("the README's settings table is the table of settings") {
  std::ifstream f(std::string(BB_SOURCE_DIR) + "/README.md");
  REQUIRE(f);
  std::vector<std::string> rows;
  std::string config_row;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("| `BB_CONFIG=", 0) == 0) config_row = line;
    else if (line.rfind("| `BB_", 0) == 0 && line.rfind("| `BB_CACHE`", 0) != 0)
      rows.push_back(line);
  }
  REQUIRE_FALSE(config_row.empty());
  std::vector<std::string> expected;
  for (const bb::shim::Setting& s : bb::shim::settings()) {
    expected.push_back(std::string("| `") + s.env + "=" + s.value + "` | " + s.doc + " |");
    CHECK(config_row.find(std::string("`") + s.key + "`") != std::string::npos);
  }
  CHECK(rows == expected);
}

TEST_CASE("a setting has the same limits in the environment and in the config file") {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/big.yaml") << "flush_seconds: 100000\n";
  Config file = config_of({{"BB_CONFIG", dir + "/big.yaml"}});
  REQUIRE(file.problems.size() == 1);
  CHECK(file.problems[0].find("big.yaml:1:16: flush_seconds '100000' is not a number in [0, 86400]") !=
        std::string::npos);
  Config env = config_of({{"BB_FLUSH_SECONDS", "100000"}});
  REQUIRE(env.problems.size() == 1);
  CHECK(env.problems[0] == "BB_FLUSH_SECONDS='100000' is not a number in [0, 86400]; using 10");
  std::ofstream(dir + "/many.yaml") << "max_signatures: 2.5\ndisable: maybe\n";
  CHECK(config_of({{"BB_CONFIG", dir + "/many.yaml"}}).problems[0].find("is not a whole number in [1, 100000000]") !=
        std::string::npos);
  CHECK(config_of({{"BB_MAX_SIGNATURES", "2.5"}}).problems[0].find("is not a whole number in [1, 100000000]") !=
        std::string::npos);
  CHECK(config_of({{"BB_DISABLE", "maybe"}}).problems[0] ==
        "BB_DISABLE='maybe' is not 1, true, on or yes, nor 0, false, off or no; using 0");
  std::ofstream(dir + "/on.yaml") << "disable: on\nint_ranges: no\nlog: 2\n";
  Config on = config_of({{"BB_CONFIG", dir + "/on.yaml"}});
  CHECK(on.problems.empty());
  CHECK(on.disabled);
  CHECK_FALSE(on.tracer.int_ranges);
  CHECK(on.log_level == bb::log::Level::Info);
}

TEST_CASE("device timing: first calls by default, with 1 and with first; every call with all; none with 0") {
  Config d = config_of({});
  CHECK((d.device_timing.enabled && d.device_timing.first_calls && !d.device_timing.first_calls_asked &&
         d.device_timing.calls == 5 && d.device_timing.refresh_s == 10.0));
  Config first =
      config_of({{"BB_DEVICE_TIME", "first"}, {"BB_DEVICE_TIME_CALLS", "3"}, {"BB_DEVICE_TIME_REFRESH", "0"}});
  CHECK(first.problems.empty());
  CHECK((first.device_timing.enabled && first.device_timing.first_calls && first.device_timing.first_calls_asked &&
         first.device_timing.calls == 3 && first.device_timing.refresh_s == 0));
  Config on = config_of({{"BB_DEVICE_TIME", "1"}});
  CHECK((on.problems.empty() && on.device_timing.enabled && on.device_timing.first_calls &&
         !on.device_timing.first_calls_asked));
  Config all = config_of({{"BB_DEVICE_TIME", "all"}});
  CHECK((all.problems.empty() && all.device_timing.enabled && !all.device_timing.first_calls));
  Config off = config_of({{"BB_DEVICE_TIME", "off"}});
  CHECK((!off.device_timing.enabled && !off.device_timing.first_calls));
  Config bad = config_of({{"BB_DEVICE_TIME", "some"}, {"BB_DEVICE_TIME_CALLS", "0"}});
  REQUIRE(bad.problems.size() == 2);
  CHECK(bad.problems[0] ==
        "BB_DEVICE_TIME='some' is not first or all, nor 1, true, on or yes, nor 0, false, off or no; using first");
  CHECK(bad.problems[1] == "BB_DEVICE_TIME_CALLS='0' is not a whole number in [1, 1000000]; using 5");
}

TEST_CASE("trace names: default, explicit, per rank, with placeholders") {
  ProcessIdentity solo{123, std::nullopt, std::nullopt};
  ProcessIdentity rank3{77, 3, 8};
  CHECK(planned_trace_path("", solo, "/work") == "/work/bbtrace.yaml");
  CHECK(planned_trace_path("out/t.yaml", solo, "/work") == "/work/out/t.yaml");
  CHECK(planned_trace_path("/abs/t.yaml", solo, "/work") == "/abs/t.yaml");
  CHECK(planned_trace_path("", rank3, "/w") == "/w/bbtrace.rank3.yaml");
  CHECK(planned_trace_path("/t/run-%r-%p.yaml", rank3, "/w") == "/t/run-3-77.yaml");
  CHECK(planned_trace_path("/t/x-%p.yaml", solo, "/w") == "/t/x-123.yaml");
  // A single-process run that happens to set RANK keeps the plain name.
  CHECK(planned_trace_path("", ProcessIdentity{1, 0, 1}, "/w") == "/w/bbtrace.yaml");
}

TEST_CASE("insert_suffix puts the suffix before the extension") {
  CHECK(insert_suffix("/a/bbtrace.yaml", "42") == "/a/bbtrace.42.yaml");
  CHECK(insert_suffix("/a.b/trace", "42") == "/a.b/trace.42");
  CHECK(insert_suffix("/a/.hidden", "42") == "/a/.hidden.42");
}

TEST_CASE("a claimed path is refused to a second claimant until released") {
  const std::string path = temp_dir() + "/bbtrace.yaml";
  PathClaim first, second;
  REQUIRE(first.claim(path) == PathClaim::Result::Claimed);
  CHECK(second.claim(path) == PathClaim::Result::Taken);
  std::string note;
  PathClaim third;
  CHECK(claim_trace_path(path, 99, third, &note) == insert_suffix(path, "99"));
  CHECK(note.find("another running process") != std::string::npos);
  first.release();
  CHECK(second.claim(path) == PathClaim::Result::Claimed);
}

TEST_CASE("atomic writes replace the file and leave no temporary behind") {
  const std::string dir = temp_dir();
  const std::string path = dir + "/t.yaml";
  REQUIRE(write_file_atomic(path, "one\n").empty());
  REQUIRE(write_file_atomic(path, "two\n").empty());
  CHECK(slurp(path) == "two\n");
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename().string());
  CHECK(left == std::vector<std::string>{"t.yaml"});
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
}

TEST_CASE("a symlink planted at a predictable temporary name redirects no write") {
  // Issue 17: the temporary was .<trace>.tmp.<pid>, opened without O_EXCL: a link planted there by
  // anyone who can write the folder redirected the write to its target.
  const std::string dir = temp_dir();
  const std::string path = dir + "/t.yaml", victim = dir + "/victim";
  { std::ofstream(victim) << "precious\n"; }
  REQUIRE(symlink(victim.c_str(), (dir + "/.t.yaml.tmp." + std::to_string(getpid())).c_str()) == 0);
  REQUIRE(write_file_atomic(path, "trace\n").empty());
  CHECK(slurp(victim) == "precious\n");
  CHECK(slurp(path) == "trace\n");
}

TEST_CASE("an atomic write into a missing folder fails with the reason") {
  std::string err = write_file_atomic("/nonexistent-dir/t.yaml", "x");
  CHECK(err.find("cannot create /nonexistent-dir/.t.yaml.tmp.") == 0);
  CHECK(err.find("No such file or directory") != std::string::npos);
}

TEST_CASE("device times are attached to their entries by signature, with the timing's health in meta") {
  bb::tracer::Snapshot snap;
  bb::trace::TraceEntry mm, add;
  mm.op = "aten::mm";
  mm.count = 3;
  auto self = bb::test::arg("self", "Tensor", bb::trace::ArgKind::Tensor);
  self.tensors.emplace_back(bb::test::tensor("float32", {2, 3}, {3, 1}));
  self.tensors[0]->device = "cuda:0";
  mm.args = {self, self};
  add.op = "aten::add.Tensor";
  add.count = 1;
  snap.entries = {add, mm};
  snap.sigs = {7, 2};  // entries are sorted by name; signatures keep their own order
  snap.devices = {"cuda:0"};
  bb::tracer::DeviceTimeSnapshot times;
  times.status = "on";
  for (uint64_t ns : {3000, 1000, 2000}) times.by_signature[2].per_call.add(ns);
  times.by_signature[2].kernels = {{"gemm", 3}, {"Memset", 6}};
  times.health.calls_timed = 3;
  times.health.unattributed = 1;
  times.health.unattributed_names = {{"triton_x", 1}};
  RunInfo run;
  auto t = make_trace(snap, run, "exited", &times);
  REQUIRE(t.ops[1].device_time);
  const bb::trace::DeviceTime want{3, 6000, 1000, 2000, 3000};
  CHECK(*t.ops[1].device_time == want);
  REQUIRE(t.ops[1].kernels.size() == 2);
  const bb::trace::KernelCount memset{"Memset", 6};
  CHECK(t.ops[1].kernels[0] == memset);  // most launches first
  CHECK_FALSE(t.ops[0].device_time);
  REQUIRE(t.meta.device_timing);
  CHECK(t.meta.device_timing->status == "on");
  const std::vector<bb::trace::KernelCount> triton{{"triton_x", 1}};
  CHECK(t.meta.device_timing->unattributed_kernels == triton);
  CHECK(t.meta.device_timing->sampled.empty());
  CHECK(bb::trace::to_yaml(t).find("sampled") == std::string::npos);  // every call timed: not mentioned

  times.sampled = "10 ms of every 100 ms";  // sampled timing says so, with its windows and cut calls
  times.windows = 12;
  times.detaches = 11;
  times.health.calls_cut = 4;
  times.health.untracked_launches = 9;
  times.events = {{100.25, "open: start"}, {100.5, "close: period"}, {100.52, "detached"}};
  auto s = make_trace(snap, run, "exited", &times);
  REQUIRE(s.meta.device_timing->events.size() == 3);
  CHECK(s.meta.device_timing->events[1].t == 100.5);
  CHECK(s.meta.device_timing->events[2].what == "detached");
  CHECK(s.meta.device_timing->sampled == "10 ms of every 100 ms");
  CHECK(s.meta.device_timing->windows == 12);
  CHECK(s.meta.device_timing->cut_calls == 4);
  CHECK(s.meta.device_timing->untracked_launches == 9);
  CHECK(s.meta.device_timing->detaches == 11);
  const std::string yaml = bb::trace::to_yaml(s);
  CHECK(yaml.find("sampled: \"10 ms of every 100 ms\"") != std::string::npos);
  CHECK(bb::trace::parse_trace(yaml, "t.yaml") == s);

  // One call's records split in two and counted twice: the trace never says more timed calls than
  // calls (a reader refuses that), and the total keeps all the device work.
  times.by_signature[2].per_call.add(500);
  auto split = make_trace(snap, run, "exited", &times);
  REQUIRE(split.ops[1].device_time);
  CHECK(split.ops[1].device_time->calls == 3);
  CHECK(split.ops[1].device_time->total_ns == 6500);
  CHECK(bb::trace::parse_trace(bb::trace::to_yaml(split), "t.yaml") == split);

  snap.devices.clear();  // a CPU-only run says nothing about device timing
  CHECK_FALSE(make_trace(snap, run, "exited", &times).meta.device_timing);
}

TEST_CASE("the timeline labels op calls with torch.profiler's names, dims and types") {
  bb::tracer::Snapshot snap;
  bb::trace::TraceEntry mm;
  mm.op = "aten::mm";
  mm.count = 1;
  auto self = bb::test::arg("self", "Tensor", bb::trace::ArgKind::Tensor);
  self.tensors.emplace_back(bb::test::tensor("bfloat16", {2, 3}, {3, 1}));
  mm.args = {self, bb::test::arg("alpha", "Scalar", bb::trace::ArgKind::Float)};
  snap.entries = {mm};
  snap.sigs = {4};
  bb::devtime::Collector::Timeline events;
  bb::devtime::OpEvent op;
  op.external = bb::devtime::make_external_id(4, 9);
  op.thread = 77;
  op.start = 1000;
  op.end = 3000;
  events.ops.push_back(op);
  RunInfo run;
  run.id.pid = 55;
  run.argv = {"python3", "x.py"};
  const std::string path = temp_dir() + "/tl.json";
  REQUIRE(write_timeline_file(path, snap, events, run).empty());
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  CHECK(j["traceName"] == "python3 x.py");
  const auto& e = j["traceEvents"][0];
  CHECK(e["name"] == "aten::mm");
  CHECK(e["cat"] == "cpu_op");
  CHECK(e["pid"] == 55);
  CHECK(e["tid"] == 77);
  CHECK(e["dur"].get<double>() == Approx(2.0));
  CHECK(e["args"]["External id"] == 9);
  CHECK(e["args"]["Input Dims"] == nlohmann::json::parse("[[2, 3], []]"));
  CHECK(e["args"]["Input type"] == nlohmann::json::parse(R"(["c10::BFloat16", "Scalar"])"));
}

TEST_CASE("the trace reader's dtype names are exactly the names the tracer writes") {
  // trace::is_dtype_name (the format library, without c10) keeps its own list: it must not drift
  // from tracer/names.cpp's table as torch adds dtypes.
  size_t named = 0;
  for (int i = 0; i < static_cast<int>(c10::ScalarType::Undefined); ++i) {  // Undefined is last but one
    const std::string name = bb::names::dtype(static_cast<c10::ScalarType>(i));
    INFO("ScalarType " << i << ": " << name);
    REQUIRE(name.rfind("dtype", 0) != 0);  // every dtype of this torch has a name
    CHECK(bb::trace::is_dtype_name(name));
    ++named;
  }
  CHECK(named == 46);  // is_dtype_name's list has 46 names: the same count, so no extra name either
}
