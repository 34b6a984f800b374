#include <sstream>

#include "catch.h"
#include "tracer/format/trace_summary.h"
#include "sample_trace.h"

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
  CHECK(s.find("aten::add.Tensor                                     7         7        0.021  100.0%        3.00  void "
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
  CHECK(bb::trace::estimated_ns(t.ops[0]) == 15000 + 2 * 2900);  // the median for each untimed call
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
  CHECK(s.find("~: extrapolated to all calls from the timed ones") != std::string::npos);
  CHECK(s.find("aten::add.Tensor                                     7         5       ~0.021  100.0%        3.00") != std::string::npos);
  // As the trace says it, when it does.
  t.ops[0].device_time->estimated_total_ns = 30000;
  CHECK(bb::trace::estimated_ns(t.ops[0]) == 30000);
}
