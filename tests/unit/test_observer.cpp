// The live tracer inside this test process: every at:: call below goes through the callback.
// Its own executable, because the callback stays registered for the rest of the process.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <torch/library.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "catch.h"
#include "shim/trace_writer.h"
#include "tracer/observer.h"
#include "tracer/format/trace_yaml.h"

using bb::trace::TraceEntry;

namespace {

bb::tracer::TraceStore* store() {
  static bb::tracer::TraceStore* s = bb::tracer::start_tracing({});
  return s;
}

// Entries of `op` whose first tensor argument has `shape`.
std::vector<TraceEntry> entries(const std::string& op, std::vector<int64_t> shape) {
  std::vector<TraceEntry> out;
  for (auto& e : store()->snapshot().entries) {
    if (e.op != op) continue;
    for (auto& a : e.args) {
      if (a.kind != bb::trace::ArgKind::Tensor) continue;
      if (a.tensors[0]->shape == shape) out.push_back(e);
      break;
    }
  }
  return out;
}

uint64_t count_of(const std::string& op, std::vector<int64_t> shape) {
  uint64_t n = 0;
  for (auto& e : entries(op, shape)) n += e.count;
  return n;
}

}  // namespace

TEST_CASE("calls are counted per exact signature") {
  store();
  auto a = at::ones({3, 7}), b = at::ones({3, 7});
  at::add(a, b);
  at::add(a, b);
  at::add(a, b, 2.0);  // another alpha: another signature
  auto found = entries("aten::add.Tensor", {3, 7});
  REQUIRE(found.size() == 2);
  CHECK(found[0].count + found[1].count == 3);
  const auto& args = found[0].args;
  REQUIRE(args.size() == 3);
  CHECK(args[0].name == "self");
  CHECK(args[1].name == "other");
  CHECK(args[2].name == "alpha");
  CHECK(args[2].type == "Scalar");
}

TEST_CASE("a signature that differs from an earlier one only in float scalars is a float variant") {
  store();
  auto a = at::ones({5, 11}), b = at::ones({5, 11});
  at::add(a, b, 0.5);
  at::add(a, b, 0.25);                 // another float alpha: a variant of the first (AdamW's step size)
  at::add(a, b, 2);                    // an integer alpha: its own signature
  at::add(a, at::ones({5, 1}), 0.25);  // another shape: its own signature
  const auto snap = store()->snapshot();
  std::map<std::string, bool> variant;  // by alpha and the second argument's shape
  for (size_t i = 0; i < snap.entries.size(); ++i) {
    const auto& e = snap.entries[i];
    if (e.op != "aten::add.Tensor" || e.args.size() != 3 || e.args[0].tensors[0]->shape != std::vector<int64_t>{5, 11})
      continue;
    const auto& alpha = e.args[2];
    const std::string what = (alpha.kind == bb::trace::ArgKind::Float ? std::to_string(alpha.f) : "int") + " " +
                             std::to_string(e.args[1].tensors[0]->shape[1]);
    variant[what] = bb::tracer::float_variant(snap.sigs[i]);
  }
  CHECK(variant == std::map<std::string, bool>{
                       {"0.500000 11", false}, {"0.250000 11", true}, {"int 11", false}, {"0.250000 1", false}});
  CHECK_FALSE(bb::tracer::float_variant(1u << 23));  // no such signature
}

TEST_CASE("a signature in a line, for device timing's events") {
  store();
  at::add(at::ones({5, 13}), at::ones({1, 13}), 0.5);
  const auto snap = store()->snapshot();
  std::string line;
  for (size_t i = 0; i < snap.entries.size(); ++i)
    if (snap.entries[i].op == "aten::add.Tensor" && snap.entries[i].args[0].tensors[0]->shape[1] == 13)
      line = bb::tracer::describe_signature(snap.sigs[i]);
  CHECK(line == "aten::add.Tensor(float32[5,13], float32[1,13], 0.5)");    // as bbtrace summary writes it
  CHECK(bb::tracer::describe_signature(1u << 23) == "signature 8388608");  // no such signature
}

TEST_CASE("nesting: a composite op has children, its decomposition is nested") {
  store();
  auto x = at::ones({5, 11}), w = at::ones({13, 11}), bias = at::ones({13});
  at::linear(x, w, bias);
  auto lin = entries("aten::linear", {5, 11});
  REQUIRE(lin.size() == 1);
  CHECK(lin[0].count == 1);
  CHECK(lin[0].nested == 0);
  CHECK(lin[0].with_children == 1);
  auto addmm = entries("aten::addmm", {13});  // addmm(bias, x, w.t())
  REQUIRE(addmm.size() == 1);
  CHECK(addmm[0].nested == 1);
  CHECK(addmm[0].top_level() == 0);
}

TEST_CASE("under autocast only the call with cast arguments is traced, once") {
  store();
  auto x = at::ones({6, 17}), w = at::ones({19, 17}), bias = at::ones({19});
  {
    // What torch.autocast("cpu", dtype=torch.bfloat16) sets; restored at the end of the scope.
    const bool was = at::autocast::is_autocast_enabled(at::kCPU);
    const auto dtype = at::autocast::get_autocast_dtype(at::kCPU);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::addmm(bias, x, w.t());
    at::addmm(bias, x, w.t());
    at::autocast::clear_cache();
    at::autocast::set_autocast_dtype(at::kCPU, dtype);
    at::autocast::set_autocast_enabled(at::kCPU, was);
  }
  auto found = entries("aten::addmm", {19});
  REQUIRE(found.size() == 1);  // not the float32 call autocast turned into a bfloat16 one
  CHECK(found[0].count == 2);
  CHECK(found[0].nested == 0);  // the outer call is not an op frame: nothing is nested in it
  for (const auto& a : found[0].args)
    if (a.kind == bb::trace::ArgKind::Tensor) CHECK(a.tensors[0]->dtype == "bfloat16");
  // Without autocast the same op is traced as called.
  at::addmm(bias, x, w.t());
  auto plain = entries("aten::addmm", {19});
  REQUIRE(plain.size() == 2);
}

TEST_CASE("integer inputs carry their observed value range") {
  store();
  auto weight = at::ones({50, 4});
  auto idx = at::arange(3, 18, at::kLong).view({3, 5});
  at::embedding(weight, idx);
  auto e = entries("aten::embedding", {50, 4});
  REQUIRE(e.size() == 1);
  const auto& indices = e[0].args[1];
  REQUIRE(indices.name == "indices");
  REQUIRE(indices.tensors[0]->range);
  CHECK(*indices.tensors[0]->range == std::make_pair(int64_t{3}, int64_t{17}));
}

TEST_CASE("counts from many threads are exact, also after the threads end") {
  store();
  const int threads = 4, calls = 2500;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      auto a = at::ones({17, 19});
      for (int i = 0; i < calls; ++i) at::mul(a, a);
    });
  for (auto& th : pool) th.join();
  auto mul = entries("aten::mul.Tensor", {17, 19});
  REQUIRE(mul.size() == 1);
  CHECK(mul[0].count == threads * calls);
  CHECK(mul[0].leaf() == mul[0].count);  // mul on the CPU calls no other op
  CHECK(mul[0].top_level() == mul[0].count);
}

TEST_CASE("backward ops on autograd threads are traced") {
  store();
  auto x = at::ones({23, 29}).set_requires_grad(true);
  at::relu(x).sum().backward();
  CHECK(count_of("aten::threshold_backward", {23, 29}) == 1);
}

TEST_CASE("the writer turns the counts into a trace file that reads back") {
  store();
  at::sub(at::ones({31}), at::ones({31}));
  char dir[] = "/tmp/bbshim-writer-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/t.yaml";
  auto run = bb::shim::current_run_info("test-torch");
  bb::shim::TraceWriter writer(store(), path, run);
  REQUIRE(writer.write("running", false));
  auto t = bb::trace::load_trace(path);
  CHECK(t.meta.status == "running");
  CHECK(t.meta.torch == "test-torch");
  CHECK(t.meta.pid == getpid());
  CHECK(t.meta.calls > 0);
  bool found = false;
  for (auto& e : t.ops) found |= e.op == "aten::sub.Tensor" && e.args[0].tensors[0]->shape == std::vector<int64_t>{31};
  CHECK(found);
  REQUIRE(writer.write("exited", true));
  CHECK(bb::trace::load_trace(path).meta.status == "exited");
  REQUIRE(writer.write("running", false));  // after the final write nothing changes the file
  CHECK(bb::trace::load_trace(path).meta.status == "exited");
}

TEST_CASE("a store that saw no calls writes no file") {
  bb::tracer::TraceStore empty(10);
  bb::shim::TraceWriter writer(&empty, "/tmp/bbshim-never-written.yaml", bb::shim::current_run_info("x"));
  REQUIRE(writer.write("exited", true));
  CHECK(access("/tmp/bbshim-never-written.yaml", F_OK) != 0);
}

TEST_CASE("named ranges are no ops: not traced, and an op inside one is not nested") {
  store();
  auto a = at::ones({2, 19});
  for (int i = 0; i < 5; ++i) {
    RECORD_FUNCTION("bb test: a named range", std::vector<c10::IValue>());
    {
      // A long name, on the heap as autograd's "autograd::engine::evaluate_function: ..." ones are.
      RECORD_FUNCTION(
          std::string("bb test: a named range whose name does not fit in a short string ") + std::to_string(i),
          std::vector<c10::IValue>());
      at::neg(a);
    }
  }
  const auto found = entries("aten::neg", {2, 19});
  REQUIRE(found.size() == 1);
  CHECK(found[0].count == 5);
  CHECK(found[0].nested == 0);
  for (const auto& e : store()->snapshot().entries) CHECK(e.op.rfind("bb test", 0) == std::string::npos);
}

namespace {

// Defines `n` ops named <prefix><k> in a library of their own; each returns its input plus one.
std::unique_ptr<torch::Library> define_ops(const std::string& prefix, int n) {
  auto lib = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "bbtest", std::nullopt, __FILE__, __LINE__);
  for (int k = 0; k < n; ++k)
    lib->def((prefix + std::to_string(k) + "(Tensor x) -> Tensor").c_str(), [](const at::Tensor& x) { return x + 1; });
  return lib;
}

void call_ops(const std::string& prefix, int n, int times, const at::Tensor& x) {
  for (int k = 0; k < n; ++k) {
    auto op = c10::Dispatcher::singleton()
                  .findSchemaOrThrow(("bbtest::" + prefix + std::to_string(k)).c_str(), "")
                  .typed<at::Tensor(const at::Tensor&)>();
    for (int t = 0; t < times; ++t) op.call(x);
  }
}

}  // namespace

TEST_CASE("ops registered and removed at run time are counted under their own names") {
  store();
  // More ops than the thread's op cache starts with (it grows), then all of them removed and as many
  // others registered, which may reuse the removed ones' addresses: each call counts under its own op.
  constexpr int kOps = 300;
  auto x = at::ones({3, 17});
  auto first = define_ops("first", kOps);
  call_ops("first", kOps, 2, x);
  first.reset();
  auto second = define_ops("second", kOps);
  call_ops("second", kOps, 3, x);
  std::map<std::string, uint64_t> counts;
  for (const auto& e : store()->snapshot().entries)
    if (e.op.rfind("bbtest::", 0) == 0) counts[e.op] += e.count;
  REQUIRE(counts.size() == 2 * kOps);
  for (int k = 0; k < kOps; ++k) {
    CHECK(counts["bbtest::first" + std::to_string(k)] == 2);
    CHECK(counts["bbtest::second" + std::to_string(k)] == 3);
  }
}

TEST_CASE("past the signature limit calls are counted as untraced") {
  bb::tracer::TraceStore small(1);
  // Exercise the store directly: the second distinct signature is refused.
  auto op = bb::tracer::OpInfo{};
  op.name = "aten::x";
  op.schema = c10::Dispatcher::singleton().findSchemaOrThrow("aten::relu", "").schema();
  op.writes = {false};
  const std::vector<c10::IValue> v1{at::ones({1})}, v2{at::ones({2})};
  c10::ArrayRef<const c10::IValue> args1(v1.data(), v1.size()), args2(v2.data(), v2.size());
  bb::tracer::KeyWords k1{1}, k2{2}, b1{11}, b2{12};
  CHECK(small.intern_signature(k1, b1, op, args1));
  CHECK_FALSE(small.intern_signature(k2, b2, op, args2));
  CHECK(small.intern_signature(k1, b1, op, args1));  // known ones still resolve
  CHECK(small.progress().signatures == 1);           // the refused one is kept nowhere
}

TEST_CASE("past kMaxFloatVariants float variants of a signature, later ones are counted under the first") {
  store();
  auto a = at::ones({3, 13}), b = at::ones({3, 13});
  const uint32_t kept = bb::tracer::TraceStore::kMaxFloatVariants;
  // A step-dependent alpha: a new value every call, as AdamW's step size is every step.
  for (uint32_t k = 0; k < kept + 50; ++k) at::add(a, b, 1.0 + 0.001 * k);
  at::add(a, b, 1.0 + 0.001 * 3);  // a value kept as a signature of its own is counted there still
  at::add(a, b, 7);                // an integer alpha is no float variant
  auto found = entries("aten::add.Tensor", {3, 13});
  uint64_t floats = 0, merged_entries = 0;
  for (const auto& e : found) {
    if (e.args[2].kind != bb::trace::ArgKind::Float) {
      CHECK((e.count == 1 && !e.floats_merged));
      continue;
    }
    ++floats;
    if (e.floats_merged) {
      ++merged_entries;
      CHECK(e.args[2].f == 1.0);  // the first: it keeps its own values
      CHECK(e.count == 51);       // its own call and the 50 past the limit
    } else {
      CHECK(e.count == (e.args[2].f == 1.0 + 0.001 * 3 ? 2u : 1u));
    }
  }
  CHECK(floats == kept);  // the store and the trace stop growing
  CHECK(merged_entries == 1);
  // In the file: floats_merged says so, and reads back.
  bb::trace::Trace t;
  t.ops = found;
  const auto back = bb::trace::parse_trace(bb::trace::to_yaml(t), "mem");
  CHECK(back.ops == t.ops);
}

namespace {

std::atomic<bool> g_hold{true};
bool held() { return g_hold.load(); }

// The trace's entry of `op` on `shape`, with sampled tracing's counts extrapolated as the writer does.
TraceEntry estimated(const std::string& op, std::vector<int64_t> shape) {
  const auto sampled = bb::tracer::sampled_tracing();
  for (auto& e : store()->snapshot(sampled ? sampled->scale : 1.0).entries)
    if (e.op == op && e.args[0].tensors[0]->shape == shape) return e;
  return {};
}

uint64_t sampled_switches() {
  const auto s = bb::tracer::sampled_tracing();
  return s ? s->info.to_sampled : 0;
}

}  // namespace

// Last in this file: it leaves the process's tracing sampled-capable (held to every call at its end).
TEST_CASE("sampled tracing: once stable, one call in N is traced and counts are extrapolated without bias") {
  store();
  bb::tracer::TraceSamplingOptions o;
  o.every = 8;
  REQUIRE(bb::tracer::start_trace_sampling(o, &held));
  CHECK_FALSE(bb::tracer::start_trace_sampling(o, &held));  // once
  auto a = at::ones({5, 11}), b = at::ones({5, 11});
  uint64_t subs = 0;
  auto sub_for = [&](std::chrono::milliseconds d) {
    for (auto end = std::chrono::steady_clock::now() + d; std::chrono::steady_clock::now() < end;)
      for (int k = 0; k < 100; ++k, ++subs) at::sub(a, b);
  };
  sub_for(std::chrono::milliseconds(400));  // held: every call traced however stable
  CHECK(sampled_switches() == 0);
  CHECK(estimated("aten::sub.Tensor", {5, 11}).count == subs);
  g_hold = false;
  for (int k = 0; k < 100 && sampled_switches() == 0; ++k) sub_for(std::chrono::milliseconds(50));
  REQUIRE(sampled_switches() == 1);
  sub_for(std::chrono::milliseconds(1500));
  // A signature first seen while sampling, made often enough to be sampled.
  auto c = at::ones({3, 13});
  const uint64_t muls = 40000;
  for (uint64_t k = 0; k < muls; ++k) at::mul(c, c);
  const TraceEntry sub = estimated("aten::sub.Tensor", {5, 11}), mul = estimated("aten::mul.Tensor", {3, 13});
  INFO("sub: " << sub.count << " estimated, " << sub.seen << " seen, " << subs << " made; mul: " << mul.count
               << " estimated, " << mul.seen << " seen, " << muls << " made");
  CHECK(sub.seen > 0);
  CHECK(sub.seen < subs);
  CHECK(std::abs(static_cast<double>(sub.count) / static_cast<double>(subs) - 1) < 0.05);
  CHECK(mul.seen > 0);
  CHECK(mul.seen < muls / 4);
  CHECK(std::abs(static_cast<double>(mul.count) / static_cast<double>(muls) - 1) < 0.10);
  // Held again (device timing, routing): every call is traced and counted exactly.
  g_hold = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto d = at::ones({7, 2});
  for (int k = 0; k < 300; ++k) at::div(d, d);
  const TraceEntry div = estimated("aten::div.Tensor", {7, 2});
  CHECK(div.count == 300);
  CHECK(div.seen == 0);
  const auto info = bb::tracer::sampled_tracing()->info;
  CHECK(info.sampled_s > 1.0);
  REQUIRE(info.events.size() >= 2);
  CHECK(info.events.back().what == "every call: device timing or routing needs every call");
}
