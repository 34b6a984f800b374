// The trace file format: golden output for every argument kind, exact round trip, precise errors.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "catch.h"
#include "sample_trace.h"
#include "tracer/format/op_name.h"
#include "tracer/format/trace_yaml.h"

using bb::trace::FormatError;
using bb::trace::parse_trace;

namespace {

std::string golden_path() { return std::string(BB_GOLDEN_DIR) + "/sample_trace.yaml"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The error a text produces, as "line:column: message" without the source name.
std::string error_of(const std::string& text) {
  try {
    parse_trace(text, "t.yaml");
  } catch (const FormatError& e) {
    REQUIRE(e.source() == "t.yaml");
    return std::to_string(e.line()) + ":" + std::to_string(e.column()) + ": " +
           std::string(e.what()).substr(std::string("t.yaml:").size() + std::to_string(e.line()).size() +
                                        std::to_string(e.column()).size() + 3);
  }
  return "no error";
}

const char* kHeader = "version: 1\nmeta: {}\nops:\n";

}  // namespace

TEST_CASE("the writer's output matches the golden file byte for byte") {
  const std::string text = bb::trace::to_yaml(bb::test::sample_trace());
  if (std::getenv("BB_UPDATE_GOLDEN")) {
    // Update mode never passes: comparing with the file just written would prove nothing.
    const bool changed = text != read_file(golden_path());
    std::ofstream out(golden_path());
    out << text;
    out.close();
    REQUIRE(out.good());
    FAIL("BB_UPDATE_GOLDEN is set: rewrote " << golden_path() << (changed ? " (changed)" : " (unchanged)")
                                             << "; review it (git diff) and commit it, then run without "
                                                "BB_UPDATE_GOLDEN");
  }
  REQUIRE(text == read_file(golden_path()));
}

TEST_CASE("every argument kind reads back exactly as written") {
  auto original = bb::test::sample_trace();
  auto back = parse_trace(bb::trace::to_yaml(original), "memory");
  REQUIRE(back == original);
  // And the same from the golden file, so old files keep reading the same way.
  REQUIRE(bb::trace::load_trace(golden_path()) == original);
}

TEST_CASE("a string value that looks like a bool or null stays a string") {
  auto back = bb::trace::load_trace(golden_path());
  const auto& args = back.ops[1].args;
  auto reduce = std::find_if(args.begin(), args.end(), [](auto& a) { return a.name == "reduce"; });
  REQUIRE(reduce->text == "true");
  REQUIRE(back.meta.argv.back() == "null");
}

TEST_CASE("malformed YAML is reported with file, line and column") {
  auto err = error_of("version: 1\nops: [\n  {op: a::b, count: 1\n");
  REQUIRE(err.rfind("4:1: ", 0) == 0);
}

TEST_CASE("semantic errors name the line, the column and what was expected") {
  CHECK(error_of("ops: []\n") == "1:1: missing key 'version'");
  // A scalar where a map was expected threw yaml-cpp's BadSubscript, not a FormatError (found by tests/fuzz).
  CHECK(error_of(std::string(kHeader) + "  - {op: aten::relu, count: 1, kernels: [x]}\n") ==
        "4:42: expected a map with the key 'name'");
  CHECK(error_of("version: 7\nops: []\n") == "1:10: unsupported trace version 7 (this build reads 1)");
  CHECK(error_of(std::string(kHeader) + "  - {op: relu, count: 1}\n") ==
        "4:10: op name 'relu' has no namespace (aten::...)");
  // Found by tests/fuzz: a name with control characters read, and did not survive a round trip.
  CHECK(error_of(std::string(kHeader) + "  - {op: \"aten::re\\rlu\", count: 1}\n") ==
        "4:10: op name 'aten::re\rlu' has characters no op name has (letters, digits, '_', '.', ':' only)");
  CHECK(error_of(std::string(kHeader) + "  - {op: aten::relu, count: -1}\n") ==
        "4:29: expected a non-negative integer, got '-1'");
  CHECK(
      error_of(std::string(kHeader) + "  - op: aten::relu\n    count: 2\n    args:\n      - {name: x, kind: blob}\n") ==
      "7:25: unknown argument kind 'blob'");
  CHECK(error_of(std::string(kHeader) +
                 "  - op: aten::relu\n    count: 1\n    args:\n      - {name: x, kind: tensor, dtype: float32, "
                 "shape: [2, 3], stride: [1], device: cpu}\n") == "7:72: stride has 1 entries, shape 2");
  CHECK(error_of(std::string(kHeader) +
                 "  - op: aten::embedding\n    count: 1\n    args:\n      - {name: i, kind: tensor, dtype: int64, "
                 "shape: [2], stride: [1], device: cpu, range: [5, 1]}\n") ==
        "7:92: expected range [min, max] with min <= max");
  CHECK(error_of(std::string(kHeader) + "  - op: aten::add.Tensor\n    count: 3\n    nested: 4\n") ==
        "6:13: nested exceeds count");
}

TEST_CASE("a repeated key is an error, not a value silently ignored") {
  CHECK(error_of(std::string(kHeader) + "  - op: aten::relu\n    count: 1\n    count: 5\n") ==
        "6:5: duplicate key 'count'");
  CHECK(error_of("version: 1\nmeta: {tool: a, tool: b}\nops: []\n") == "2:17: duplicate key 'tool'");
  CHECK(error_of("version: 1\nops: []\nversion: 1\n") == "3:1: duplicate key 'version'");
}

TEST_CASE("an unknown dtype name is an error") {
  const std::string arg = std::string(kHeader) + "  - op: aten::relu\n    count: 1\n    args:\n      - {name: x, ";
  CHECK(error_of(arg + "kind: tensor, dtype: foo, shape: [2], stride: [1], device: cpu}\n") ==
        "7:40: unknown dtype 'foo'");
  CHECK(error_of(arg + "kind: dtype, value: float99}\n") == "7:39: unknown dtype 'float99'");
  CHECK(parse_trace(arg + "kind: dtype, value: float8_e4m3fn}\n", "t.yaml").ops[0].args[0].text == "float8_e4m3fn");
}

TEST_CASE("negative sizes, strides and offsets are errors, as in the TorchBench reader") {
  const std::string arg = std::string(kHeader) +
                          "  - op: aten::relu\n    count: 1\n    args:\n      - {name: x, "
                          "kind: tensor, dtype: float32, device: cpu, ";
  CHECK(error_of(arg + "shape: [2, -3], stride: [3, 1]}\n") == "7:73: expected a size >= 0, got -3");
  CHECK(error_of(arg + "shape: [2, 3], stride: [-3, 1]}\n") == "7:86: expected a stride >= 0, got -3");
  CHECK(error_of(arg + "shape: [2], stride: [1], offset: -1}\n") == "7:95: expected an offset >= 0, got -1");
}

TEST_CASE("a missing file is an error that names it") {
  try {
    bb::trace::load_trace("/nonexistent/trace.yaml");
    FAIL("no error");
  } catch (const FormatError& e) {
    REQUIRE(std::string(e.what()) == "/nonexistent/trace.yaml:0:0: cannot open file");
  }
}

TEST_CASE("rank, shape products and nesting have limits, with the position in the error") {
  const std::string arg = std::string(kHeader) +
                          "  - op: aten::relu\n    count: 1\n    args:\n      - {name: x, "
                          "kind: tensor, dtype: float32, device: cpu, ";
  std::string ones = "1";
  for (int i = 1; i < 64; ++i) ones += ", 1";
  CHECK(error_of(arg + "shape: [" + ones + ", 1], stride: [" + ones + ", 1]}\n") ==
        "7:69: a tensor of 65 dimensions; the limit is 64");
  const auto t64 = parse_trace(arg + "shape: [" + ones + "], stride: [" + ones + "]}\n", "t.yaml");
  CHECK(t64.ops[0].args[0].tensors[0]->shape.size() == 64);
  // contiguous_strides, numel and storage extents multiplied these unchecked.
  CHECK(error_of(arg + "shape: [4294967296, 4294967296], stride: [1, 1]}\n") ==
        "7:69: the product of the sizes does not fit in 64 bits");
  CHECK(error_of(arg + "shape: [3, 3], stride: [4611686018427387904, 1]}\n") ==
        "7:69: the storage it spans (the sum of (size - 1) * stride) does not fit in 64 bits");
  CHECK(error_of(arg + "shape: [2], stride: [1], offset: 9223372036854775807}\n") ==
        "7:69: its offset plus the storage it spans does not fit in 64 bits");
  // 10,000 nested flow sequences.
  const std::string deep = std::string(kHeader) + "  - {op: a::b, count: 1, args: " + std::string(10000, '[') +
                           std::string(10000, ']') + "}\n";
  // yaml-cpp stops at about 500 levels with "bad file" at 1:1; this names the limit and the bracket.
  CHECK(error_of(deep) == "4:95: nested deeper than the limit of 64 levels");
  std::string nested = "1";
  for (int i = 0; i < 70; ++i) nested = "[" + nested + "]";
  CHECK(error_of(std::string(kHeader) + "  - {op: a::b, count: 1, args: " + nested + "}\n") ==
        "4:93: nested deeper than the limit of 64 levels");
}

TEST_CASE("aliases expand to at most what the file could hold written out; a bomb is refused at once") {
  // Each line aliases the previous one ten times: 10^20 values, and the duplicate-key walk visited them all.
  std::string bomb = std::string(kHeader) + "  - {op: a::b, count: 1}\nx0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i < 20; ++i) {
    bomb += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) bomb += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
    bomb += "]\n";
  }
  const auto message = error_of(bomb);
  CHECK(message.find("anchors and aliases expand to more values than the file's size allows") != std::string::npos);
  // Modest sharing, as a hand-written trace might use it, is read as written out.
  const auto t = parse_trace(
      std::string(kHeader) +
          "  - op: aten::add.Tensor\n    count: 1\n    args:\n"
          "      - &x {name: self, kind: tensor, dtype: float32, device: cpu, shape: [2, 3], stride: [3, 1]}\n"
          "      - *x\n",
      "t.yaml");
  REQUIRE(t.ops[0].args.size() == 2);
  CHECK(t.ops[0].args[1].tensors[0]->shape == std::vector<int64_t>{2, 3});
}

TEST_CASE("only regular files of at most the size limit are read, and the error says why") {
  auto error_reading = [](const std::string& path) {
    try {
      bb::trace::load_trace(path);
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // /dev/zero ended in std::bad_alloc; a FIFO blocked forever (nothing writes to it here).
  CHECK(error_reading("/dev/zero") ==
        "/dev/zero:0:0: not a regular file (a FIFO, a device or a socket cannot be read as input)");
  CHECK(error_reading("/") == "/:0:0: is a directory, not a file");
  char dir[] = "/tmp/bb_test_limits_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string fifo = std::string(dir) + "/fifo", big = std::string(dir) + "/big.yaml";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_reading(fifo) ==
        fifo + ":0:0: not a regular file (a FIFO, a device or a socket cannot be read as input)");
  REQUIRE(truncate(big.c_str(), 0) != 0);  // not there yet
  { std::ofstream(big).put('x'); }
  REQUIRE(truncate(big.c_str(), bb::format::kMaxInputBytes + 1) == 0);  // sparse: costs no disk
  CHECK(error_reading(big) == big + ":0:0: larger than the input limit of 1 GiB");
  std::remove(fifo.c_str());
  std::remove(big.c_str());
  rmdir(dir);
}

TEST_CASE("base_name drops the overload") {
  CHECK(bb::trace::base_name("aten::add.Tensor") == "aten::add");
  CHECK(bb::trace::base_name("aten::relu") == "aten::relu");
  CHECK(bb::trace::base_name("aten::_foreach_add_.List") == "aten::_foreach_add_");
}

TEST_CASE("extrapolated totals and the timing mode read back as written") {
  auto t = bb::test::sample_trace();
  t.ops[0].device_time = bb::trace::DeviceTime{5, 15000, 2000, 2900, 4100, 20800};
  auto& d = *t.meta.device_timing;
  d.mode = "first-calls";
  d.sampled = "first 5 calls of each signature, one more every 10 s";
  d.windows = 3;
  d.detaches = 2;
  d.cut_calls = 1;
  d.untracked_launches = 6;
  d.control_ns = 12000000;
  d.signatures_short = 4;
  d.cupti_overhead_ns = 777;
  d.cupti_overhead_records = 2;
  d.events = {{812345.000001, "open: start"}, {812345.5, "close: no wanted call for 20 ms"}, {812345.52, "detached"}};
  const std::string text = bb::trace::to_yaml(t);
  CHECK(text.find("estimated_total_ns: 20800") != std::string::npos);
  CHECK(text.find("mode: first-calls") != std::string::npos);
  CHECK(text.find("untracked_launches: 6") != std::string::npos);
  CHECK(text.find("- {t: 812345.000001, what: \"open: start\"}") != std::string::npos);
  REQUIRE(parse_trace(text, "memory") == t);
  CHECK(error_of("version: 1\nmeta:\n  device_timing:\n    events: [{what: x}]\n") ==
        "4:14: an event needs t (CLOCK_MONOTONIC seconds)");
  CHECK(error_of("version: 1\nmeta:\n  device_timing:\n    events: {t: 1}\n") ==
        "4:13: expected events to be a list of {t: seconds, what: text}");
  const std::string low = std::string(kHeader) +
                          "  - op: aten::relu\n    count: 9\n    args: []\n"
                          "    device_time: {calls: 2, total_ns: 100, min_ns: 50, median_ns: 50, max_ns: 50, "
                          "estimated_total_ns: 90}\n";
  CHECK(error_of(low) == "7:103: estimated_total_ns is below total_ns");
  t.ops[0].device_time = bb::trace::DeviceTime{0, 0, 0, 0, 0, 9000, true};
  const std::string similar = bb::trace::to_yaml(t);
  CHECK(similar.find("estimated_total_ns: 9000, from_similar: true}") != std::string::npos);
  REQUIRE(parse_trace(similar, "memory") == t);
  CHECK(error_of(std::string(kHeader) +
                 "  - {op: aten::relu, count: 2, device_time: {calls: 1, total_ns: 5, min_ns: 5, median_ns: 5, "
                 "max_ns: 5, estimated_total_ns: 10, from_similar: true}}\n")
            .find("from_similar needs calls: 0 and an estimated_total_ns") != std::string::npos);
}

TEST_CASE("sampled tracing's extrapolated counts and meta.tracing read back as written") {
  auto t = bb::test::sample_trace();
  t.ops[0].seen = 3;  // 7 calls, 3 of them seen
  bb::trace::TracingInfo tr = bb::test::sample_tracing();
  tr.events = {{812345.25, "sampled: 0 new signatures in the last 5000 calls"}};
  t.meta.tracing = tr;
  const std::string text = bb::trace::to_yaml(t);
  CHECK(text.find("    seen: 3\n") != std::string::npos);
  CHECK(text.find("  tracing:\n    sampled: \"1 call in 16") != std::string::npos);
  REQUIRE(parse_trace(text, "memory") == t);
  CHECK(error_of(std::string(kHeader) + "  - {op: aten::relu, count: 2, seen: 3, args: []}\n") ==
        "4:38: seen exceeds count (count is the calls seen and extrapolated)");
  CHECK(error_of("version: 1\nmeta:\n  tracing: [1]\n") == "3:12: expected tracing to be a map");
}
