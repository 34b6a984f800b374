#include "replay/random/random_judge.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <sstream>

#include "bb/kernel.h"
#include "policy/verify/result_checks.h"
#include "replay/case/spent.h"
#include "replay/random/random_checks.h"
#include "replay/judgeable/random_ops.h"
#include "replay/random/random_stats.h"
#include "tracer/format/trace_model.h"

namespace bb::replay {
namespace {

using trace::ArgKind;
using trace::ArgValue;
using trace::TensorMeta;

std::string full_name(const BoundCall& call) {
  const auto& n = call.op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

int index_of(const BoundCall& call, const std::string& name) {
  const auto& params = call.op.schema().arguments();
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name() == name) return static_cast<int>(i);
  return -1;
}

// A parameter's value in the call (the table's default where the call has none; NAN when None).
double parameter(const BoundCall& call, const std::string& name, double fallback) {
  const int i = index_of(call, name);
  if (name.empty() || i < 0) return fallback;
  const auto& a = call.args[static_cast<size_t>(i)];
  if (!a) return fallback;
  if (a->kind == ArgKind::Float) return a->f;
  if (a->kind == ArgKind::Int) return static_cast<double>(a->i);
  return NAN;
}

void set_parameter(BoundCall& call, const std::string& name, double value) {
  const int i = index_of(call, name);
  if (name.empty() || i < 0) return;
  const c10::Argument& p = call.op.schema().arguments()[static_cast<size_t>(i)];
  ArgValue a;
  a.name = name;
  a.type = p.type()->str();
  a.kwarg_only = p.kwarg_only();
  const bool floating = p.real_type()->kind() == c10::TypeKind::FloatType;
  a.kind = floating ? ArgKind::Float : ArgKind::Int;
  a.f = value;
  a.i = static_cast<int64_t>(value);
  call.args[static_cast<size_t>(i)] = a;
}

Model model_of(const BoundCall& call, const RandomOp& op) {
  Model m{op.distribution, parameter(call, op.first, op.first_default), parameter(call, op.second, op.second_default)};
  if (op.distribution == Distribution::Integers && op.first.empty()) m.a = 0;
  return m;
}

// The tensor whose shape is the result's: `self` for in-place ops, else the first tensor argument.
TensorMeta* shaped_tensor(BoundCall& call) {
  for (auto& a : call.args)
    if (a && a->kind == ArgKind::Tensor && a->tensors[0]) return &*a->tensors[0];
  return nullptr;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Dense strides with the traced dimension order (by stride, outermost first), or nullopt when the
// traced tensor is not dense in some order (its layout kind could not be kept).
std::optional<std::vector<int64_t>> dense_strides(const TensorMeta& t, const std::vector<int64_t>& shape) {
  const size_t d = shape.size();
  std::vector<size_t> order(d);
  for (size_t k = 0; k < d; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return t.stride[x] > t.stride[y]; });
  auto strides_for = [&](const std::vector<int64_t>& sizes) {
    std::vector<int64_t> s(d);
    int64_t next = 1;
    for (size_t k = d; k-- > 0;) s[order[k]] = next, next *= std::max<int64_t>(sizes[order[k]], 1);
    return s;
  };
  const std::vector<int64_t> traced = strides_for(t.shape);
  for (size_t k = 0; k < d; ++k)
    if (t.shape[k] > 1 && traced[k] != t.stride[k]) return std::nullopt;
  return strides_for(shape);
}

// The enlargement rule (docs/replay.md): a result of fewer than stats::kDecidable elements grows
// along its first dimension, k times, k the least that reaches it: a factory's size argument, or
// every tensor argument of the result's shape, each kept dense in its traced dimension order (a
// contiguous input stays contiguous, a transposed or channels-last one stays so). "" or why not.
std::string enlarge(BoundCall& call, const RandomOp& op, int64_t* traced) {
  const std::string fewer = "fewer than " + std::to_string(stats::kDecidable) + " elements, and ";
  const int size = op.size.empty() ? -1 : index_of(call, op.size);
  if (size >= 0 && call.args[static_cast<size_t>(size)]) {
    std::vector<int64_t>& s = call.args[static_cast<size_t>(size)]->ints;
    *traced = numel(s);
    if (*traced >= stats::kDecidable) return "";
    if (s.empty() || s[0] == 0) return fewer + "a result of no elements or no dimension cannot grow";
    s[0] *= (stats::kDecidable + *traced - 1) / *traced;
    return "";
  }
  TensorMeta* shaped = shaped_tensor(call);
  if (!shaped) return "no tensor argument gives the result's shape";
  const TensorMeta reference = *shaped;
  *traced = numel(reference.shape);
  if (*traced >= stats::kDecidable) return "";
  if (reference.shape.empty() || reference.shape[0] == 0)
    return fewer + "a result of no elements or no dimension cannot grow";
  std::vector<int64_t> shape = reference.shape;
  shape[0] *= (stats::kDecidable + *traced - 1) / *traced;
  for (auto& a : call.args) {
    if (!a || a->kind != ArgKind::Tensor || !a->tensors[0] || a->tensors[0]->shape != reference.shape) continue;
    TensorMeta& t = *a->tensors[0];
    auto strides = dense_strides(t, shape);
    if (!strides || t.offset != 0) return fewer + "a tensor of it is not dense: growing it would change its layout";
    t.shape = shape;
    t.stride = *strides;
    t.range.reset();
  }
  return "";
}

// The second parameter set: what a kernel that ignores its parameters gets wrong.
bool vary(BoundCall& call, const RandomOp& op, const Model& m) {
  auto probability = [](double p) { return p < 0.5 ? p + 0.25 : p - 0.25; };
  switch (op.distribution) {
    case Distribution::Bernoulli:
    case Distribution::Dropout:
    case Distribution::FusedDropout:
    case Distribution::Geometric:
      if (op.first.empty() || index_of(call, op.first) < 0 || !std::isfinite(m.a)) return false;
      set_parameter(call, op.first, probability(m.a));
      return true;
    case Distribution::Integers:
      if (index_of(call, op.second) < 0 || !std::isfinite(m.b)) return false;
      set_parameter(call, op.second, m.a + 2 * (m.b - m.a));
      return true;
    case Distribution::Normal:
    case Distribution::LogNormal:
    case Distribution::Cauchy:
    case Distribution::Uniform:
    case Distribution::Exponential: {
      bool any = false;
      if (!op.first.empty() && index_of(call, op.first) >= 0) set_parameter(call, op.first, m.a + 0.5), any = true;
      if (!op.second.empty() && index_of(call, op.second) >= 0)
        set_parameter(call, op.second, op.distribution == Distribution::Uniform ? m.b + 1.5 : m.b * 2), any = true;
      if (op.distribution == Distribution::Exponential && any) set_parameter(call, op.first, m.a * 2);
      return any;
    }
    default: return false;
  }
}

std::string shape_mismatch(const Values& native, const Values& got) {
  if (native.size() != got.size())
    return "the kernel returned " + std::to_string(got.size()) + " results, native " + std::to_string(native.size());
  for (size_t k = 0; k < native.size(); ++k) {
    if (!native[k].isTensor() || !got[k].isTensor()) continue;
    const at::Tensor &n = native[k].toTensor(), &g = got[k].toTensor();
    std::ostringstream s;
    s << "result " << k << ": ";
    if (n.sizes() != g.sizes()) s << "shape " << g.sizes() << ", native " << n.sizes();
    else if (n.scalar_type() != g.scalar_type())
      s << "dtype " << g.scalar_type() << ", native " << n.scalar_type();
    else if (n.device() != g.device())
      s << "device " << g.device() << ", native " << n.device();
    else if (n.layout() != g.layout())
      s << "layout " << g.layout() << ", native " << n.layout();
    else {
      for (int64_t d = 0; d < n.dim(); ++d)
        if (n.size(d) > 1 && n.stride(d) != g.stride(d)) return s.str() + "strides differ from native's";
      continue;
    }
    return s.str();
  }
  return "";
}

at::Tensor tensor_arg(const BoundCall& call, const Values& inputs, const std::string& name) {
  const int i = index_of(call, name);
  return i >= 0 && inputs[static_cast<size_t>(i)].isTensor() ? inputs[static_cast<size_t>(i)].toTensor() : at::Tensor();
}

// One parameter set judged: native and the kernel on the same inputs, then the kernel's values.
struct Judged {
  RandomVerdict verdict;
  Values inputs, got;
};

Judged judge_once(const BoundCall& call, const RandomOp& op, const RandomSides& sides, uint64_t seed, double alpha) {
  Judged j;
  j.inputs = sides.inputs(call, seed);
  Values native;
  try {
    native = sides.run(call, j.inputs, false);
  } catch (const std::exception& e) {
    j.verdict = {Status::Invalid, std::string("native rejects this call: ") + e.what()};
    return j;
  }
  j.got = sides.run(call, j.inputs, true);
  Spent spent(phase::kCompare);  // (the judge's statistics are its comparison)
  if (std::string why = shape_mismatch(native, j.got); !why.empty()) return j.verdict = {Status::Failed, why}, j;
  const bool dropout = op.distribution == Distribution::Dropout || op.distribution == Distribution::FusedDropout;
  const at::Tensor input = dropout ? j.inputs[0].toTensor() : at::Tensor();
  const at::Tensor probabilities = tensor_arg(call, j.inputs, op.probabilities);
  auto why_not = [&](const Values& v) {
    const at::Tensor mask = dropout && v.size() > 1 && v[1].isTensor() ? v[1].toTensor() : at::Tensor();
    return check_values(model_of(call, op), v[0].toTensor(), mask, input, probabilities, alpha);
  };
  const std::string why = why_not(j.got);
  if (why.empty()) return j;
  // A check native's own values fail too cannot tell an honest kernel from another here (torch's CPU
  // bfloat16 uniform_ draws from its parameters rounded to bfloat16, its normal_ from bfloat16-rounded
  // uniforms): not held against the kernel.
  if (std::string native_why = why_not(native); !native_why.empty()) {
    j.verdict = {Status::Skipped, "not judged: native's own values fail the same check (" + native_why +
                                      "), so it cannot tell an honest kernel here; the kernel's: " + why};
    return j;
  }
  j.verdict = {Status::Failed, why};
  return j;
}

}  // namespace

bool judged_by_properties(const BoundCall& call) { return random_op(full_name(call)) && unrebuildable(call).empty(); }

void prepare_random_inputs(const BoundCall& call, std::vector<c10::IValue>& values, uint64_t seed) {
  const RandomOp* op = random_op(full_name(call));
  if (!op || op->probabilities.empty()) return;
  const int i = index_of(call, op->probabilities);
  if (i < 0 || !values[static_cast<size_t>(i)].isTensor()) return;
  const at::Tensor& t = values[static_cast<size_t>(i)].toTensor();
  if (!t.defined() || t.is_meta()) return;
  at::Generator g = at::detail::createCPUGenerator(seed ^ 0x9e3779b97f4a7c15ULL);
  t.copy_(at::empty(t.sizes(), at::kDouble).uniform_(0, 1, g));
}

namespace {

// What a case judged, for the report's `statistics` field.
std::string judged_text(const RandomOp& op, int64_t traced, int64_t judged, int checks, bool second,
                        const std::string& undecidable) {
  std::ostringstream s;
  s << "judged by its properties: shape, dtype, layout and device as native's, values in range";
  if (op.distribution == Distribution::Dropout || op.distribution == Distribution::FusedDropout)
    s << ", dropped elements zero, kept ones scaled by 1/(1-p), the mask consistent with the output";
  if (!undecidable.empty()) {
    s << "; statistics not decidable (" << undecidable << ")";
    return s.str();
  }
  s << "; statistically on " << judged << " elements";
  if (judged != traced) s << " (the traced " << traced << ", enlarged along the first dimension)";
  s << ": " << checks << " checks (exact binomial bounds";
  if (op.distribution == Distribution::BernoulliTensor) s << ", Hoeffding's bound on the number of ones";
  s << "; two calls on the same inputs must differ";
  if (second) s << "; again with other parameters";
  s << "), false-alarm rate at most " << stats::kFalseAlarm << " per case";
  return s.str();
}

}  // namespace

RandomVerdict judge_random(const BoundCall& traced, const RandomSides& sides, uint64_t seed, CaseResult& r) {
  const RandomOp& op = *random_op(full_name(traced));
  BoundCall call = traced;
  int64_t traced_n = 0;
  const Model model = model_of(call, op);
  const std::string undecidable =
      parameters_known(model) ? enlarge(call, op, &traced_n) : "a parameter of the distribution is None";
  BoundCall varied = call;
  const bool second = undecidable.empty() && vary(varied, op, model);
  const int checks = statistical_checks(model) * (second ? 2 : 1) + 1;
  // Statistics not decidable: bounds at alpha 0 reject only counts that cannot happen.
  const double alpha = undecidable.empty() ? stats::kFalseAlarm / checks : 0.0;
  Judged first = judge_once(call, op, sides, seed, alpha);
  const int64_t n = first.got.empty() || !first.got[0].isTensor() ? 0 : first.got[0].toTensor().numel();
  r.statistics = judged_text(op, traced_n, n, checks, second, undecidable);
  if (first.verdict.status != Status::Passed) return first.verdict;
  const Values again = sides.run(call, first.inputs, true);
  const at::Tensor probabilities = tensor_arg(call, first.inputs, op.probabilities);
  const bool identical = [&] {
    Spent spent(phase::kCompare);
    return undecidable.empty() && log_identical(model, n, probabilities) < std::log(alpha) && !again.empty() &&
           verify::bitwise_equal({first.got[0]}, {again[0]});
  }();
  if (identical) {
    r.flags.push_back(verify::Flag::CachedResult);
    std::ostringstream s;
    s << "two calls on the same inputs returned identical values, which an honest random kernel does with a "
         "probability below "
      << alpha << " (a fixed seed, a mask that is the same on every call, a cached result)";
    return {Status::Failed, s.str()};
  }
  if (!second) return {};
  Judged other = judge_once(varied, op, sides, seed + 1000003, alpha);
  if (other.verdict.status == Status::Invalid) {
    r.statistics += " (native rejected the other parameters: that part was not judged)";
    return {};
  }
  if (other.verdict.status != Status::Passed) {
    const Model m2 = model_of(varied, op);
    std::ostringstream s;
    s << "with the parameters changed to";
    if (!op.first.empty() && std::isfinite(m2.a)) s << " " << op.first << " = " << m2.a;
    if (!op.second.empty() && std::isfinite(m2.b)) s << " " << op.second << " = " << m2.b;
    s << ": " << other.verdict.message;
    return {Status::Failed, s.str()};
  }
  return {};
}

}  // namespace bb::replay
