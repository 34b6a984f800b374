// What bbtrace can tell of a backend's coverage without torch (replay/judgeable/coverage_preview.h), with
// bbreplay's own reasons (replay/judgeable/judgeable.h) and tally.
#include "catch.h"
#include "replay/judgeable/coverage_preview.h"
#include "replay/judgeable/judgeable.h"

using namespace bb;
using namespace bb::replay;

namespace {

trace::TraceEntry entry(const std::string& op, uint64_t count, std::vector<trace::ArgValue> args = {}) {
  trace::TraceEntry e;
  e.op = op;
  e.count = count;
  e.args = std::move(args);
  return e;
}

trace::ArgValue arg(const std::string& name, const std::string& type, trace::ArgKind kind, double f = 0) {
  trace::ArgValue a;
  a.name = name;
  a.type = type;
  a.kind = kind;
  a.f = f;
  return a;
}

}  // namespace

TEST_CASE("profiler markers are bookkeeping in any namespace; ops are not") {
  for (const char* op :
       {"profiler::_record_function_enter_new", "profiler::_record_function_exit._RecordFunction",
        "aten::_record_function_enter", "profiler::_call_end_callbacks_on_jit_fut", "ProfilerStep#3", "## forward ##"})
    CHECK(bookkeeping(op).rfind("profiler bookkeeping", 0) == 0);
  for (const char* op : {"aten::relu", "aten::profile", "torchvision::nms", "##"}) CHECK(bookkeeping(op).empty());
}

TEST_CASE("dropout probability 0 or training off make a random op's call deterministic") {
  const auto p0 = arg("p", "float", trace::ArgKind::Float, 0.0), p1 = arg("p", "float", trace::ArgKind::Float, 0.1);
  auto off = arg("train", "bool", trace::ArgKind::Bool);
  CHECK(deterministic_by_arguments({{"p", &p0}}));
  CHECK_FALSE(deterministic_by_arguments({{"p", &p1}}));
  CHECK(deterministic_by_arguments({{"p", &p1}, {"train", &off}}));
  CHECK_FALSE(deterministic_by_arguments({{"p", nullptr}}));
}

TEST_CASE("a backend's coverage before replay: no kernel, bookkeeping, random ops in and out of the table") {
  trace::Trace t;
  t.ops.push_back(entry("aten::relu", 50));
  t.ops.push_back(entry("aten::add.Tensor", 30));
  t.ops.push_back(entry("aten::bernoulli_.float", 10, {arg("generator", "Generator?", trace::ArgKind::None)}));
  t.ops.push_back(entry("aten::multinomial", 6, {arg("generator", "Generator?", trace::ArgKind::None)}));
  t.ops.push_back(entry("profiler::_record_function_enter_new", 4));
  const std::set<std::string> kernels = {"aten::relu", "aten::bernoulli_.float", "aten::multinomial",
                                         "profiler::_record_function_enter_new"};
  const Coverage c = tally_coverage(coverage_items(t, kernels));
  CHECK(c.calls == 100);
  CHECK(c.judged_calls == 60);  // relu and the bernoulli_ judged by its properties
  REQUIRE(c.not_judged.size() == 3);
  CHECK(c.not_judged[0].op == "aten::add.Tensor");
  CHECK(c.not_judged[0].reason == kNoKernel);
  CHECK(c.not_judged[1].op == "aten::multinomial");
  CHECK(c.not_judged[1].reason == kRandomOp);
  CHECK(c.not_judged[2].reason == "profiler bookkeeping");
}
