// Rebuilding traced calls (replay/case/inputs): arguments bound to the schema and made into values.
#include <ATen/ATen.h>

#include "catch.h"
#include "replay/case/inputs.h"
#include "tracer/format/trace_yaml.h"

namespace {

bb::trace::TraceEntry entry_of(const std::string& ops_yaml) {
  const std::string text =
      "version: 1\nmeta: {tool: test, torch: \"2.11.0\", created: \"2026-12-01T00:00:00Z\", "
      "updated: \"2026-12-01T00:00:00Z\", status: exited, pid: 1, hostname: h, argv: [], "
      "devices: [], calls: 1, untraced_calls: 0}\nops:\n" +
      ops_yaml;
  auto trace = bb::trace::parse_trace(text, "test.yaml");
  REQUIRE(trace.ops.size() == 1);
  return trace.ops[0];
}

}  // namespace

TEST_CASE("an undefined tensor for a Tensor parameter stays a tensor; for Tensor? it is None") {
  // _cudnn_attention_backward takes attn_bias and cum_seq_q/k as Tensor, and is called with
  // undefined tensors there (traced as kind none): None in their place is rejected by native.
  std::string t =
      "{name: x, type: \"Tensor\", kind: tensor, dtype: float32, shape: [2, 3], stride: [3, 1], device: cpu}";
  auto tensor_arg = [&](const std::string& name) {
    std::string a = t;
    return "      - " + a.replace(a.find("x"), 1, name) + "\n";
  };
  std::string yaml = "  - op: aten::_cudnn_attention_backward\n    count: 1\n    args:\n";
  for (const char* n : {"grad_out", "query", "key", "value", "out", "logsumexp", "philox_seed", "philox_offset"})
    yaml += tensor_arg(n);
  yaml +=
      "      - {name: attn_bias, type: \"Tensor\", kind: none}\n"
      "      - {name: cum_seq_q, type: \"Tensor\", kind: none}\n"
      "      - {name: cum_seq_k, type: \"Tensor\", kind: none}\n"
      "      - {name: max_q, type: \"SymInt\", kind: int, value: 3}\n"
      "      - {name: max_k, type: \"SymInt\", kind: int, value: 3}\n"
      "      - {name: dropout_p, type: \"float\", kind: float, value: 0.0}\n"
      "      - {name: is_causal, type: \"bool\", kind: bool, value: true}\n"
      "      - {name: scale, type: \"float?\", kind: none, kwarg_only: true}\n";
  auto bound = bb::replay::bind_call(entry_of(yaml));
  auto values = bb::replay::make_inputs(bound, {});
  REQUIRE(values.size() == 16);
  for (size_t i : {8, 9, 10}) {
    INFO("argument " << i);
    REQUIRE(values[i].isTensor());
    CHECK_FALSE(values[i].toTensor().defined());
  }
  CHECK(values[15].isNone());  // float? scale
  REQUIRE(values[0].isTensor());
  CHECK(values[0].toTensor().sizes() == at::IntArrayRef({2, 3}));
}

TEST_CASE("the same options make the same values; another seed other values") {
  auto bound = bb::replay::bind_call(entry_of(
      "  - op: aten::relu\n    count: 1\n    args:\n"
      "      - {name: self, type: \"Tensor\", kind: tensor, dtype: float32, shape: [64], stride: [1], device: cpu}\n"));
  bb::replay::InputOptions o;
  o.seed = 7;
  auto a = bb::replay::make_inputs(bound, o), b = bb::replay::make_inputs(bound, o);
  CHECK(at::equal(a[0].toTensor(), b[0].toTensor()));
  o.seed = 8;
  auto c = bb::replay::make_inputs(bound, o);
  CHECK_FALSE(at::equal(a[0].toTensor(), c[0].toTensor()));
}

namespace {

const char* const kRelu64 =
    "  - op: aten::relu\n    count: 1\n    args:\n"
    "      - {name: self, type: \"Tensor\", kind: tensor, dtype: float32, shape: [8, 8], stride: [8, 1], device: cpu}\n";

}  // namespace

TEST_CASE("a call that cannot be bound says why") {
  CHECK_THROWS_AS(bb::replay::bind_call(entry_of("  - op: aten::no_such_op\n    count: 1\n    args: []\n")),
                  std::invalid_argument);
  CHECK_THROWS_AS(bb::replay::bind_call(entry_of("  - op: aten::relu\n    count: 1\n    args: []\n")),
                  std::invalid_argument);  // self is missing and has no default
}

TEST_CASE("variants change the inputs as they say, and apply only where they mean something") {
  auto bound = bb::replay::bind_call(entry_of(kRelu64));
  CHECK(bb::replay::unreplayable(bound).empty());
  bb::replay::InputOptions o;
  auto traced = bb::replay::make_inputs(bound, o);
  CHECK(traced[0].toTensor().is_contiguous());
  CHECK(traced[0].toTensor().strides() == at::IntArrayRef({8, 1}));
  o.variant = "noncontiguous";
  REQUIRE(bb::replay::variant_applies(bound, o.variant));
  auto strided = bb::replay::make_inputs(bound, o);
  CHECK(strided[0].toTensor().sizes() == at::IntArrayRef({8, 8}));
  CHECK_FALSE(strided[0].toTensor().is_contiguous());
  o.variant = "empty";
  REQUIRE(bb::replay::variant_applies(bound, o.variant));
  CHECK(bb::replay::make_inputs(bound, o)[0].toTensor().numel() == 0);
  o.variant = "special-values";
  auto special = bb::replay::make_inputs(bound, o)[0].toTensor();
  CHECK((special.isnan().any().item<bool>() || special.isinf().any().item<bool>()));
  auto ints = bb::replay::bind_call(entry_of(
      "  - op: aten::relu\n    count: 1\n    args:\n"
      "      - {name: self, type: \"Tensor\", kind: tensor, dtype: int64, shape: [4], stride: [1], device: cpu}\n"));
  CHECK_FALSE(bb::replay::variant_applies(ints, "special-values"));  // no integer NaN
  CHECK_FALSE(bb::replay::variant_applies(ints, "large-values"));
}

TEST_CASE("large-values scales only floating-point inputs and float16 ones least") {
  const std::string yaml =
      "  - op: aten::add.Tensor\n    count: 1\n    args:\n"
      "      - {name: self, type: \"Tensor\", kind: tensor, dtype: DT, shape: [4096], stride: [1], device: cpu}\n"
      "      - {name: other, type: \"Tensor\", kind: tensor, dtype: int64, shape: [4096], stride: [1], device: cpu, "
      "range: [-3, 3]}\n";
  auto largest = [&](const std::string& dtype, const std::string& variant) {
    std::string y = yaml;
    auto bound = bb::replay::bind_call(entry_of(y.replace(y.find("DT"), 2, dtype)));
    REQUIRE(bb::replay::variant_applies(bound, variant));
    bb::replay::InputOptions o;
    o.variant = variant;
    auto v = bb::replay::make_inputs(bound, o);
    const at::Tensor ints = v[1].toTensor();
    CHECK(ints.min().item<int64_t>() >= -3);  // integers keep their traced range
    CHECK(ints.max().item<int64_t>() <= 3);
    const at::Tensor x = v[0].toTensor().to(at::kDouble);
    CHECK(x.isfinite().all().item<bool>());
    return x.abs().max().item<double>();
  };
  for (const char* dtype : {"float32", "bfloat16", "float64"}) {
    CAPTURE(dtype);
    CHECK(largest(dtype, "traced") < 6);
    CHECK(largest(dtype, "large-values") > 150);  // past float32's exp overflow (88.7) and expm1(2x)'s (44.4)
  }
  CHECK(largest("float16", "large-values") > 12);  // past float16's exp overflow (11.1)
  CHECK(largest("float16", "large-values") < 40);
}

TEST_CASE("a case's bytes are known before anything is allocated") {
  auto bound = bb::replay::bind_call(entry_of(kRelu64));
  const auto bytes = bb::replay::case_bytes(bound, "traced");
  REQUIRE(bytes.has_value());
  CHECK(*bytes == 2 * 64 * 4);  // the input and relu's result of the same size
}

TEST_CASE("random ops are not replayable: their results are not a function of their inputs") {
  auto bound = bb::replay::bind_call(entry_of(
      "  - op: aten::bernoulli\n    count: 1\n    args:\n"
      "      - {name: self, type: \"Tensor\", kind: tensor, dtype: float32, shape: [4], stride: [1], device: cpu}\n"));
  CHECK_FALSE(bb::replay::unreplayable(bound).empty());
  CHECK_FALSE(bb::replay::variant_applies(bound, "noncontiguous"));
}

TEST_CASE("a loss's ignore_index is among its targets where the program passed it, and total_weight counts it out") {
  auto call = [](const std::string& range) {
    return bb::replay::bind_call(entry_of(
        "  - op: aten::nll_loss_backward\n    count: 1\n    args:\n"
        "      - {name: grad_output, type: \"Tensor\", kind: tensor, dtype: float32, shape: [], stride: [], device: cpu}\n"
        "      - {name: self, type: \"Tensor\", kind: tensor, dtype: float32, shape: [64, 10], stride: [10, 1], device: cpu}\n"
        "      - {name: target, type: \"Tensor\", kind: tensor, dtype: int64, shape: [64], stride: [1], device: cpu, "
        "range: " + range + "}\n"
        "      - {name: weight, type: \"Tensor?\", kind: none}\n"
        "      - {name: reduction, type: \"int\", kind: int, value: 1}\n"
        "      - {name: ignore_index, type: \"SymInt\", kind: int, value: -100}\n"
        "      - {name: total_weight, type: \"Tensor\", kind: tensor, dtype: float32, shape: [], stride: [], device: cpu}\n"));
  };
  auto ignored = [](const std::vector<c10::IValue>& v) { return v[2].toTensor().eq(-100).sum().item<int64_t>(); };
  auto counted = [](const std::vector<c10::IValue>& v) { return v[6].toTensor().item<double>(); };
  for (const char* variant : {"traced", "special-values"}) {
    INFO(variant);
    const auto passed = bb::replay::make_inputs(call("[-100, 9]"), {c10::kCPU, 3, variant});
    const at::Tensor target = passed[2].toTensor();
    CHECK(target.eq(-100).any().item<bool>());
    CHECK(target.index({0}).item<int64_t>() == -100);
    CHECK(ignored(passed) < 64);
    CHECK(target.ne(-100).logical_and(target.lt(0).logical_or(target.ge(10))).sum().item<int64_t>() == 0);
    CHECK(counted(passed) == static_cast<double>(64 - ignored(passed)));  // (derived: the forward's count)
  }
  const auto never = bb::replay::make_inputs(call("[0, 9]"), {c10::kCPU, 3, "traced"});
  CHECK(ignored(never) == 0);
  CHECK(counted(never) == 64.0);
  CHECK(ignored(bb::replay::make_inputs(call("[0, 9]"), {c10::kCPU, 3, "special-values"})) > 0);
}
