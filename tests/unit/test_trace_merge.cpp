// bbtrace merge: the traces of a program's ranks as one: counts summed per signature, device time
// combined, each process kept in meta.merged_from.
#include "catch.h"
#include "sample_trace.h"
#include "tracer/format/device_estimate.h"
#include "tracer/format/trace_merge.h"
#include "tracer/format/trace_yaml.h"

using namespace bb::trace;

namespace {

// Rank `r` of a two-GPU job: the sample trace, on cuda:<r>, with its own pid, counts and times.
Trace rank_trace(int r) {
  Trace t = bb::test::sample_trace();
  t.meta.rank = r;
  t.meta.pid = 100 + r;
  t.meta.devices = {{"cuda:" + std::to_string(r), "NVIDIA H200"}};
  t.meta.created = r ? "2026-11-30T01:00:01Z" : "2026-11-30T01:00:00Z";
  for (auto& e : t.ops)
    for (auto& a : e.args) {
      for (auto& x : a.tensors)
        if (x && x->device == "cuda:0") x->device = "cuda:" + std::to_string(r);
      if (a.kind == ArgKind::Device) a.text = "cuda:" + std::to_string(r);
    }
  if (r == 1) {
    t.ops[0].count = 9;
    t.ops[0].device_time = DeviceTime{9, 90000, 1000, 9000, 20000};
    t.ops[0].kernels[0].launches = 9;
    t.ops[1].args[0].tensors[0]->range = std::make_pair(int64_t{-10}, int64_t{5});  // indices seen on rank 1
  }
  return t;
}

}  // namespace

TEST_CASE("merged ranks: one signature per call, counts summed, device time combined") {
  const Trace r0 = rank_trace(0), r1 = rank_trace(1);
  const Trace m = merge_traces({r1, r0}, {"b.yaml", "a.yaml"});  // ordered by rank, not as given
  REQUIRE(m.ops.size() == r0.ops.size());
  const TraceEntry& add = m.ops[0];
  CHECK(add.op == "aten::add.Tensor");
  CHECK(add.count == 7 + 9);
  CHECK(add.nested == 2 * r0.ops[0].nested);
  CHECK(add.args[1].tensors[0]->device == "cuda:0");  // rank 1's cuda:1 is its first device
  REQUIRE(add.device_time);
  CHECK(add.device_time->calls == 16);
  CHECK(add.device_time->total_ns == 21000 + 90000);
  CHECK(add.device_time->min_ns == 1000);
  CHECK(add.device_time->max_ns == 20000);
  // medians 2900 (7 calls) and 9000 (9 calls): the calls-weighted median of the medians
  CHECK(add.device_time->median_ns == 9000);
  CHECK(add.kernels[0].launches == 16);
  // observed index ranges joined
  CHECK(m.ops[1].args[0].tensors[0]->range == std::make_pair(int64_t{-10}, int64_t{999}));
  CHECK(m.meta.calls == 2 * r0.meta.calls);
  CHECK(m.meta.devices.size() == 1);
  CHECK(m.meta.device_timing->calls_timed == 2 * r0.meta.device_timing->calls_timed);
  CHECK(m.meta.created == "2026-11-30T01:00:00Z");
  // Sampled timing's events: every process's, in time order, each with its pid.
  Trace e0 = r0, e1 = r1;
  e0.meta.device_timing->events = {{10.0, "open: start"}, {10.3, "close: period"}};
  e1.meta.device_timing->events = {{10.1, "open: start"}};
  const Trace me = merge_traces({e0, e1}, {"a.yaml", "b.yaml"});
  REQUIRE(me.meta.device_timing->events.size() == 3);
  CHECK(me.meta.device_timing->events[1].t == 10.1);
  CHECK(me.meta.device_timing->events[1].what == "pid " + std::to_string(e1.meta.pid) + ": open: start");
  CHECK(me.meta.device_timing->events[2].what == "pid " + std::to_string(e0.meta.pid) + ": close: period");
  CHECK(!m.meta.rank);
  CHECK(m.meta.world_size == 2);
}

TEST_CASE("a merged trace keeps every process and reads back as it was written") {
  const Trace m = merge_traces({rank_trace(0), rank_trace(1)}, {"bbtrace.rank0.yaml", "bbtrace.rank1.yaml"});
  REQUIRE(m.meta.merged_from.size() == 2);
  CHECK(m.meta.merged_from[1].file == "bbtrace.rank1.yaml");
  CHECK(m.meta.merged_from[1].pid == 101);
  CHECK(m.meta.merged_from[1].rank == 1);
  CHECK(m.meta.merged_from[1].devices[0].device == "cuda:1");  // as that process numbered it
  CHECK(m.meta.merged_from[0].argv == rank_trace(0).meta.argv);
  CHECK(parse_trace(to_yaml(m), "m.yaml") == m);
  // merging a merged trace with another rank keeps the processes flat
  Trace r2 = rank_trace(1);
  r2.meta.rank = 2;
  r2.meta.pid = 102;
  const Trace again = merge_traces({m, r2}, {"m.yaml", "r2.yaml"});
  CHECK(again.meta.merged_from.size() == 3);
}

TEST_CASE("--keep-devices keeps rank 1's cuda:1 a signature of its own") {
  const Trace r0 = rank_trace(0);
  const Trace m = merge_traces({r0, rank_trace(1)}, {"a", "b"}, {false});
  size_t on_cuda = 0;  // signatures with a CUDA tensor or device value: one per rank; the others merge
  for (const auto& e : r0.ops) {
    bool cuda = false;
    for (const auto& a : e.args) {
      cuda |= a.kind == ArgKind::Device && a.text.rfind("cuda", 0) == 0;
      for (const auto& t : a.tensors) cuda |= t && t->device.rfind("cuda", 0) == 0;
    }
    on_cuda += cuda;
  }
  REQUIRE(on_cuda > 0);
  CHECK(m.ops.size() == r0.ops.size() + on_cuda);
  CHECK(m.meta.devices.size() == 2);
}

TEST_CASE("traces of different programs, or one trace twice, are not merged") {
  Trace other = rank_trace(1);
  other.meta.torch = "2.10.0";
  try {
    merge_traces({rank_trace(0), other}, {"a.yaml", "b.yaml"});
    FAIL("merged");
  } catch (const TraceMergeError& e) {
    CHECK(std::string(e.what()).find("b.yaml was traced with bbshim 0.1.0 and torch 2.10.0") != std::string::npos);
  }
  try {
    merge_traces({rank_trace(0), rank_trace(0)}, {"a.yaml", "copy.yaml"});
    FAIL("merged");
  } catch (const TraceMergeError& e) {
    CHECK(std::string(e.what()).find("a.yaml and copy.yaml are the same process (pid 100") != std::string::npos);
  }
}

TEST_CASE("merged estimates: sampled parts' estimates summed, a part estimated from similar ones adds its estimate") {
  Trace r0 = rank_trace(0), r1 = rank_trace(1);
  r0.ops[0].device_time = DeviceTime{5, 15000, 2000, 2900, 4100, 15000 + 2 * 2900};  // 5 of 7 timed
  r1.ops[0].device_time = DeviceTime{0, 0, 0, 0, 0, 9 * 3000, true};                 // none timed, 9 calls
  const Trace m = merge_traces({r0, r1}, {"a.yaml", "b.yaml"});
  const DeviceTime& d = *m.ops[0].device_time;
  CHECK(d.calls == 5);
  CHECK(d.total_ns == 15000);
  CHECK(d.min_ns == 2000);  // the timed part's, not the estimated part's zeros
  CHECK(d.max_ns == 4100);
  CHECK(d.median_ns == 2900);
  CHECK(d.estimated_total_ns == 15000 + 2 * 2900 + 9 * 3000);
  CHECK_FALSE(d.from_similar);
  CHECK(estimated_ns(m.ops[0]) == d.estimated_total_ns);
}

TEST_CASE("a process that sampled its tracing: the merged counts say how many calls were seen") {
  Trace r0 = rank_trace(0), r1 = rank_trace(1);  // add.Tensor: 7 and 9 calls
  r1.ops[0].seen = 2;                            // rank 1 saw 2 of its 9
  TracingInfo tr = bb::test::sample_tracing();
  tr.calls_seen = 4;
  r1.meta.tracing = tr;
  const Trace m = merge_traces({r0, r1}, {"a.yaml", "b.yaml"});
  CHECK(m.ops[0].count == 16);
  CHECK(m.ops[0].seen == 7 + 2);  // rank 0 traced every call
  CHECK(m.ops[1].seen == 0);      // exact in both
  REQUIRE(m.meta.tracing);
  CHECK(m.meta.tracing->calls_seen == r0.meta.calls + 4);
  CHECK(m.meta.tracing->scale == 16);
  CHECK(m.meta.tracing->sampled == tr.sampled);
  CHECK(!merge_traces({r0, rank_trace(1)}, {"a.yaml", "b.yaml"}).meta.tracing);
}

TEST_CASE("a signature that merged float variants in any process is marked so in the merged trace") {
  Trace r0 = rank_trace(0), r1 = rank_trace(1);
  r1.ops[0].floats_merged = true;
  const Trace m = merge_traces({r0, r1}, {"a.yaml", "b.yaml"});
  CHECK(m.ops[0].floats_merged);
  CHECK_FALSE(m.ops[1].floats_merged);
  CHECK(parse_trace(to_yaml(m), "m.yaml").ops == m.ops);
}
