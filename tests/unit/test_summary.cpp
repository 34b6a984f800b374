#include <sstream>

#include "catch.h"
#include "tracer/format/trace_summary.h"
#include "sample_trace.h"
#include "tracer/format/device_estimate.h"

TEST_CASE("the summary lists ops by calls with their signature counts") {
  auto t = bb::test::sample_trace();
  auto extra = t.ops[0];
  extra.count = 5;
  extra.nested = 5;
  t.ops.push_back(extra);  // a second aten::add.Tensor signature
  std::ostringstream out;
  bb::trace::print_summary(t, "x.yaml", {10, 2}, out);
  const std::string s = out.str();
  CHECK(s.find("trace x.yaml\n") == 0);
  CHECK(s.find("torch 2.11.0+cu130, pid 4242, rank 1, status exited") != std::string::npos);
  CHECK(s.find("devices: cpu, cuda:0 (NVIDIA H200)") != std::string::npos);
  CHECK(s.find("15 calls, 4 signatures, 3 ops, 1 calls past the signature limit") != std::string::npos);
  // add.Tensor: 12 calls over 2 signatures; 7-2 + 5-5 top-level; all leaf.
  CHECK(s.find("aten::add.Tensor                                    12      2          5        12         8") !=
        std::string::npos);
  CHECK(s.find("top signatures by calls\n         7  aten::add.Tensor(float32[2,3], bfloat16[3]@cuda:0, 0.1)") !=
        std::string::npos);
}

TEST_CASE("the summary ranks ops by device time when the trace has it") {
  auto t = bb::test::sample_trace();  // add.Tensor: 7 calls timed, 21 us in total
  std::ostringstream out;
  bb::trace::print_summary(t, "x.yaml", {10, 0}, out);
  const std::string s = out.str();
  CHECK(s.find("device timing: on; 7 calls timed, 2 device activities outside any op (0.002 ms), 1 calls unfinished "
               "at exit (not timed)") != std::string::npos);
  CHECK(s.find("top ops by device time") != std::string::npos);
  CHECK(
      s.find("aten::add.Tensor                                     7         7        0.021  100.0%        3.00  void "
             "at::native::vectorized_elementwise_kernel<4, at::nat...") != std::string::npos);
  CHECK(s.find("~: extrapolated") == std::string::npos);  // every call was timed
  t.ops[0].device_time.reset();
  std::ostringstream none;
  bb::trace::print_summary(t, "x.yaml", {10, 0}, none);
  CHECK(none.str().find("top ops by device time") == std::string::npos);
}

TEST_CASE("where not every call was timed, the summary extrapolates and marks the total") {
  auto t = bb::test::sample_trace();  // add.Tensor: 7 calls
  t.ops[0].device_time = bb::trace::DeviceTime{5, 15000, 2000, 2900, 4100};
  CHECK(bb::trace::estimated_ns(t.ops[0]) == 15000);  // no estimate in the trace: what was timed
  CHECK(bb::trace::extrapolate(*t.ops[0].device_time, 7) == 15000 + 2 * 2900);  // the median per untimed call
  t.ops[0].device_time->estimated_total_ns = 15000 + 2 * 2900;
  t.meta.device_timing->mode = "first-calls";
  t.meta.device_timing->sampled = "first 5 calls of each signature";
  t.meta.device_timing->cupti_overhead_records = 3;
  t.meta.device_timing->cupti_overhead_ns = 250000;
  t.meta.device_timing->control_ns = 9000000;
  std::ostringstream out;
  bb::trace::print_summary(t, "x.yaml", {10, 0}, out);
  const std::string s = out.str();
  CHECK(s.find("7 calls timed (first-calls: first 5 calls of each signature)") != std::string::npos);
  CHECK(s.find("CUPTI's own overhead 0.250 ms, attaching and detaching 9.000 ms") != std::string::npos);
  CHECK(s.find("~: extrapolated to all calls from the timed ones, or from signatures equal but for float scalars") !=
        std::string::npos);
  CHECK(s.find("aten::add.Tensor                                     7         5       ~0.021  100.0%        3.00") !=
        std::string::npos);
  // As the trace says it, when it does.
  t.ops[0].device_time->estimated_total_ns = 30000;
  CHECK(bb::trace::estimated_ns(t.ops[0]) == 30000);
}

TEST_CASE("a signature none of whose calls was timed gets the device time of those equal but for float scalars") {
  using namespace bb::trace;
  auto t = bb::test::sample_trace();  // add.Tensor(float32[2,3], bfloat16[3]@cuda:0, alpha 0.1): 7 calls
  TraceEntry step2 = t.ops[0], other = t.ops[0], ints = t.ops[1];
  t.ops[0].device_time = DeviceTime{3, 9000, 2900, 3000, 3100, 21000};
  step2.args[2].f = 0.2;  // the same call with another alpha: a new signature, never timed
  step2.count = 4;
  step2.device_time.reset();
  other.args[0].tensors[0]->shape = {4, 3};  // other shapes: no estimate
  other.device_time.reset();
  ints.device_time.reset();
  t.ops = {t.ops[0], step2, other, ints};
  CHECK(estimate_from_similar(t.ops) == 1);
  REQUIRE(t.ops[1].device_time);
  CHECK(t.ops[1].device_time->from_similar);
  CHECK(t.ops[1].device_time->calls == 0);
  CHECK(t.ops[1].device_time->estimated_total_ns == 4 * 3000);
  CHECK(estimated_ns(t.ops[1]) == 4 * 3000);
  CHECK_FALSE(t.ops[2].device_time);
  CHECK_FALSE(t.ops[3].device_time);
  std::ostringstream out;
  print_summary(t, "x.yaml", {10, 0}, out);  // the op's total: 21000 + 12000 ns, estimated
  CHECK(out.str().find("~0.033") != std::string::npos);
}

TEST_CASE("counts extrapolated by sampled tracing are marked, and so is the device time built on them") {
  auto t = bb::test::sample_trace();  // add.Tensor: 7 calls, all timed
  t.ops[0].seen = 3;
  t.meta.tracing = bb::test::sample_tracing();  // 6 calls seen, 1.5 s every call traced, 2.25 s sampled
  std::ostringstream out;
  bb::trace::print_summary(t, "x.yaml", {10, 2}, out);
  const std::string s = out.str();
  CHECK(s.find("tracing: sampled, 1 call in 16, at random, once the signatures seen are stable; 6 of ~10 calls "
               "seen; every call traced 1.50 s, sampled 2.25 s") != std::string::npos);
  CHECK(s.find("~10 calls, 3 signatures") != std::string::npos);
  CHECK(s.find("~: extrapolated from the calls sampled tracing saw") != std::string::npos);
  CHECK(s.find("aten::add.Tensor                                    ~7") != std::string::npos);
  CHECK(s.find("test::every_kind                                     3") != std::string::npos);  // exact
  CHECK(s.find("       ~7  aten::add.Tensor(") != std::string::npos);
  CHECK(s.find("~0.021") != std::string::npos);  // its device total rests on the extrapolated count
}
