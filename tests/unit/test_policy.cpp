// Policy parsing (with the positions of errors), condition evaluation, tolerances, comparisons,
// backend folder names.
#include <ATen/ATen.h>

#include <cmath>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "backends/op_kinds.h"
#include "backends/op_names.h"
#include "catch.h"
#include "policy/verify/compare.h"
#include "policy/policy.h"
#include "tracer/format/trace_yaml.h"

using namespace bb::policy;
using namespace bb::verify;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_policy(text, "p.yaml");
  } catch (const bb::trace::FormatError& e) {
    return std::string(e.what()).substr(std::string("p.yaml:").size());
  }
  return "no error";
}

std::vector<c10::IValue> args(std::initializer_list<c10::IValue> v) { return v; }

}  // namespace

TEST_CASE("a full policy parses") {
  Policy p = parse_policy(R"(version: 1
backend: ../kernels
default: {mode: shadow, on_error: raise, tolerance: {float32: {rtol: 1e-4, atol: 1e-6}}}
ops:
  aten::relu: {}
  aten::add.Tensor:
    mode: route
    when: {device: [cpu, cuda], dtype: [float32, bfloat16], contiguous: true, rank: [1, 4], numel: [1, 1e9]}
    tolerance: {bfloat16: {rtol: 0.02, atol: 0.001}}
)",
                          "/etc/bb/policy.yaml");
  CHECK(*p.backend == "/etc/bb/../kernels");
  REQUIRE(p.ops.size() == 2);
  const OpPolicy* relu = p.find("aten::relu");
  REQUIRE(relu);
  CHECK(relu->mode == Mode::Shadow);  // from the defaults
  CHECK(relu->on_error == OnError::Raise);
  CHECK(relu->line == 5);
  const OpPolicy* add = p.find("aten::add.Tensor");
  CHECK(add->mode == Mode::Route);
  CHECK(add->when.devices == std::vector<c10::DeviceType>{c10::kCPU, c10::kCUDA});
  CHECK(add->when.dtypes == std::vector<c10::ScalarType>{at::kFloat, at::kBFloat16});
  CHECK(*add->when.contiguous);
  CHECK(add->when.numel->second == 1000000000);
  CHECK(tolerance_for(p, *add, at::kBFloat16).rtol == 0.02);
  CHECK(tolerance_for(p, *add, at::kFloat).rtol == 1e-4);   // policy default
  CHECK(tolerance_for(p, *add, at::kDouble).rtol == 1e-7);  // torch.testing's
  CHECK(tolerance_for(p, *add, at::kLong).atol == 0);       // integers: exact
  CHECK_FALSE(p.find("aten::neg"));
}

TEST_CASE("policy errors say file, line, column and what is wrong") {
  CHECK(error_of("ops: {}\n") == "1:1: missing key 'version'");
  CHECK(error_of("version: 2\nops: {}\n") == "1:10: unsupported policy version (this build reads 1)");
  CHECK(error_of("version: 1\nops: {}\nextra: 1\n") ==
        "3:1: unknown key 'extra' (expected version, backend, default, ops)");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {mode: fast}\n") == "3:22: mode 'fast' is not route, shadow or off");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {on_error: ignore}\n") ==
        "3:26: on_error 'ignore' is not fallback or raise");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {when: {rank: [4, 1]}}\n") ==
        "3:29: rank must be [min, max] with 0 <= min <= max < 2^63");
  // Beyond int64_t the conversion was undefined behaviour (found by tests/fuzz under UBSan); NaN passed.
  CHECK(error_of("version: 1\nops:\n  aten::relu: {when: {numel: [0, 1e300]}}\n") ==
        "3:30: numel must be [min, max] with 0 <= min <= max < 2^63");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {when: {rank: [.nan, .nan]}}\n") ==
        "3:29: rank must be [min, max] with 0 <= min <= max < 2^63");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {when: {numel: [0, 9.2e18]}}\n") == "no error");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {when: {device: [gpu]}}\n") == "3:32: unknown device type 'gpu'");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {when: {device: [cuda:1]}}\n") ==
        "3:32: device 'cuda:1': give a device type (cpu, cuda), not an index");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {tolerance: {float32: {rtol: -1, atol: 0}}}\n") ==
        "3:37: tolerances must not be negative");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {}\n  aten::relu: {}\n") == "4:3: duplicate key 'aten::relu'");
  CHECK(error_of("version: 1\nops: [aten::relu]\n") ==
        "2:6: expected 'ops' to map op names (aten::add.Tensor) to their settings");
}

TEST_CASE("conditions read metadata only") {
  Condition c;
  c.devices = {c10::kCPU};
  c.dtypes = {at::kFloat};
  c.rank = {1, 2};
  c.numel = {1, 100};
  CHECK(unmet(c, args({at::ones({3, 4})})) == nullptr);
  CHECK(std::string(unmet(c, args({at::ones({3, 4}, at::kDouble)}))) == "dtype");
  CHECK(std::string(unmet(c, args({at::ones({2, 2, 2})}))) == "rank");
  CHECK(std::string(unmet(c, args({at::ones({200})}))) == "numel");
  CHECK(std::string(unmet(c, args({at::ones({3}, at::TensorOptions().device(at::kMeta))}))) == "device");
  c.contiguous = true;
  CHECK(std::string(unmet(c, args({at::ones({3, 4}).t()}))) == "contiguity");
  CHECK(std::string(unmet(c, args({c10::IValue(int64_t{3})}))) == "no tensor argument");
  CHECK(unmet(Condition{}, args({c10::IValue(int64_t{3})})) == nullptr);  // no condition: always met
}

TEST_CASE("comparisons: tolerance, NaN positions, shapes, integers") {
  auto a = at::tensor({1.0f, 2.0f, NAN, 4.0f});
  CHECK_FALSE(compare_tensors(a, a.clone(), {0, 0}));
  CHECK_FALSE(compare_tensors(a, a + 1e-7, {1e-6, 0}));
  auto m = compare_tensors(a, at::tensor({1.0f, 2.5f, NAN, 4.0f}), {1e-6, 1e-5});
  REQUIRE(m);
  CHECK(m->what == "values");
  CHECK(m->first_index == 1);
  CHECK(m->max_abs == Approx(0.5));
  CHECK(m->detail.find("1 of 4 elements differ; first at flat index 1 (expected 2, got 2.5)") != std::string::npos);
  CHECK(compare_tensors(a, at::tensor({1.0f, 2.0f, 3.0f, 4.0f}), {1, 1})->what == "values");  // NaN lost
  CHECK(compare_tensors(a, at::ones({2, 2}), {1, 1})->what == "shape");
  CHECK(compare_tensors(a, a.to(at::kDouble), {1, 1})->what == "dtype");
  CHECK(compare_tensors(at::tensor({1, 2}), at::tensor({1, 3}), default_tolerance(at::kLong))->first_index == 1);
  // No bound on values and no errors wanted: kind, shape and dtype alone (NaN lost or not)
  const Tolerance any = {INFINITY, INFINITY};
  CHECK_FALSE(compare_tensors(a, at::tensor({1.0f, 2.0f, 3.0f, 4.0f}), any));
  CHECK(compare_tensors(a, at::ones({2, 2}), any)->what == "shape");
  CHECK(compare_tensors(a, a.to(at::kDouble), any)->what == "dtype");
  CHECK(compare_tensors(a, at::Tensor(), any)->what == "kind");
  ErrorStats wanted;  // (errors wanted: the values are read)
  CHECK(compare_tensors(a, at::tensor({1.0f, 2.0f, 3.0f, 4.0f}), any, &wanted)->what == "values");
}

TEST_CASE("the relative error of an element expected to be 0 is measured from atol / rtol, not from 0") {
  ErrorStats stats;
  const auto e = at::tensor({0.0, 1.0}, at::kDouble);
  CHECK_FALSE(compare_tensors(e, at::tensor({1e-9, 1.0 + 1e-9}, at::kDouble), {1e-5, 1e-8}, &stats));
  CHECK(stats.max_abs == Approx(1e-9));
  CHECK(stats.max_rel == Approx(1e-9 / (1e-8 / 1e-5)));  // not 1e-9 / DBL_MIN
  // No tolerance to scale by: measured from the smallest normal double.
  ErrorStats exact;
  CHECK(compare_tensors(e, at::tensor({1e-9, 1.0}, at::kDouble), {0, 0}, &exact));
  CHECK(exact.max_rel > 1e290);
}

TEST_CASE("backend folder names follow BackendBench's") {
  using namespace bb::backends;
  CHECK(*op_from_folder("add__Tensor") == "aten::add.Tensor");
  CHECK(*op_from_folder("relu__default") == "aten::relu");
  CHECK(*op_from_folder("native_layer_norm__default") == "aten::native_layer_norm");
  CHECK(*op_from_folder("__and____Tensor") == "aten::__and__.Tensor");
  CHECK_FALSE(op_from_folder("relu"));
  CHECK(folder_from_op("aten::add.Tensor") == "add__Tensor");
  CHECK(folder_from_op("aten::relu") == "relu__default");
  CHECK(folder_from_op("aten::__and__.Tensor") == "__and____Tensor");
}

TEST_CASE("strict_strides is inherited from the default and set per op") {
  Policy p = parse_policy(
      "version: 1\ndefault: {strict_strides: true}\nops:\n  aten::relu: {}\n"
      "  aten::add.Tensor: {strict_strides: false}\n",
      "p.yaml");
  CHECK(p.defaults.strict_strides);
  CHECK(p.find("aten::relu")->strict_strides);
  CHECK_FALSE(p.find("aten::add.Tensor")->strict_strides);
  CHECK(error_of("version: 1\ndefault: {strict_strides: maybe}\n").find("2:") == 0);
}

TEST_CASE("a policy section of a file that is not a map is an error, not a yaml-cpp exception") {
  // Found by tests/fuzz (fuzz_policy): yaml-cpp's operator[] threw YAML::BadSubscript on a scalar root,
  // which no caller catches (the preload catches FormatError only).
  char path[] = "/tmp/bb_test_policy_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  for (const char* text : {"just text\n", "[1, 2]\n"}) {
    { std::ofstream(path) << text; }
    std::string error = "no error";
    try {
      load_policy_section(path, "policy");
    } catch (const bb::trace::FormatError& e) {
      error = std::string(e.what()).substr(std::string(path).size());
    }
    CHECK(error == ":1:1: expected a map with the key 'policy'");
  }
  std::remove(path);
}

TEST_CASE("allow_aten: none by default, all, or named ops; inherited from the default; bad names are errors") {
  Policy p = parse_policy(
      "version: 1\ndefault: {allow_aten: [aten::exp, add.Tensor, sum.default]}\nops:\n  aten::relu: {}\n"
      "  aten::abs: {allow_aten: all}\n  aten::neg: {allow_aten: none}\n",
      "p.yaml");
  CHECK(p.find("aten::relu")->allow_aten.ops == std::vector<std::string>{"aten::exp", "aten::add.Tensor", "aten::sum"});
  CHECK(p.find("aten::abs")->allow_aten.all);
  CHECK(p.find("aten::neg")->allow_aten.empty());
  CHECK(&allowance_for(p, "aten::relu") == &p.find("aten::relu")->allow_aten);
  CHECK(&allowance_for(p, "aten::cos") == &p.defaults.allow_aten);  // an op the policy does not name
  CHECK(parse_policy("version: 1\nops:\n  aten::relu: {}\n", "p.yaml").find("aten::relu")->allow_aten.empty());
  CHECK(error_of("version: 1\nops:\n  aten::relu: {allow_aten: [aten::no_such_op]}\n") ==
        "3:29: allow_aten: unknown op 'aten::no_such_op' (no such op or overload in this torch)");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {allow_aten: [add.NoSuchOverload]}\n") ==
        "3:29: allow_aten: unknown op 'aten::add.NoSuchOverload' (no such op or overload in this torch)");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {allow_aten: some}\n") ==
        "3:28: allow_aten 'some' is not all, none or a list of op names");
  CHECK(error_of("version: 1\nops:\n  aten::relu: {allow_aten: {a: 1}}\n") ==
        "3:28: expected allow_aten to be all, none or a list of op names");
}

TEST_CASE("ops without a tensor in or out are plumbing; one tensor makes an op compute") {
  using bb::backends::is_plumbing_op;
  CHECK(is_plumbing_op("aten::promote_types"));  // (ScalarType, ScalarType) -> ScalarType
  CHECK(is_plumbing_op("aten::can_cast"));
  CHECK_FALSE(is_plumbing_op("aten::result_type.Tensor"));  // takes tensors: not judged by its returns alone
  CHECK_FALSE(is_plumbing_op("aten::equal"));               // (Tensor, Tensor) -> bool does the comparison
  CHECK_FALSE(is_plumbing_op("aten::exp"));
}

TEST_CASE("in-place changes of a tensor's metadata alone are plumbing; in-place arithmetic is not") {
  using bb::backends::is_plumbing_for;
  using bb::backends::is_plumbing_op;
  CHECK(is_plumbing_op("aten::detach_"));  // (ATen's inplace_view tag)
  CHECK(is_plumbing_op("aten::squeeze_.dim"));
  CHECK(is_plumbing_op("aten::as_strided_"));
  CHECK_FALSE(is_plumbing_op("aten::relu_"));
  CHECK_FALSE(is_plumbing_op("aten::add_.Tensor"));
  CHECK(is_plumbing_for("aten::native_layer_norm", "aten::detach_"));
  CHECK_FALSE(is_plumbing_for("aten::detach_", "aten::detach_"));  // (never a kernel's own op)
}

TEST_CASE("what allow_aten lets a kernel call: never its own op nor an op doing its work") {
  using bb::backends::AtenAllowance;
  using bb::backends::is_allowed_for;
  const AtenAllowance all{true, {}}, named{false, {"aten::exp", "aten::add.Tensor", "aten::mul"}}, none;
  CHECK(is_allowed_for("aten::relu", "aten::exp", all));
  CHECK_FALSE(is_allowed_for("aten::relu", "aten::exp", none));
  CHECK_FALSE(is_allowed_for("aten::relu", "aten::relu", all));              // its own op
  CHECK_FALSE(is_allowed_for("aten::add.Tensor", "aten::add.Scalar", all));  // another overload of it
  CHECK_FALSE(is_allowed_for("aten::clone", "aten::copy_", all));            // plumbing doing its work
  CHECK(is_allowed_for("aten::relu", "aten::add.Tensor", named));
  CHECK_FALSE(is_allowed_for("aten::relu", "aten::add.Scalar", named));  // another overload than the one named
  CHECK(is_allowed_for("aten::relu", "aten::mul.Tensor", named));        // a name without overload: every one
  CHECK(is_allowed_for("aten::relu", "aten::mul.Scalar", named));
  CHECK_FALSE(is_allowed_for("aten::relu", "aten::sin", named));
}
