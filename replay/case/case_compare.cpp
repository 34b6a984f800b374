// Step "compare" of a replay case (replay/case/case_steps.h): the kernel's results against native's.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "policy/policy.h"
#include "policy/verify/compare.h"
#include "policy/verify/integrity.h"
#include "policy/verify/result_checks.h"
#include "policy/verify/values.h"
#include "replay/case/case_steps.h"
#include "replay/case/poison.h"
#include "replay/case/spent.h"
#include "tracer/names.h"

namespace bb::replay {
namespace {

// Ops whose outputs hold whatever was in memory (empty, empty_like, resize_, ...): only their shapes,
// dtypes and strides can be compared.
bool uninitialized_output(const c10::OperatorHandle& op) {
  const std::string name = op.schema().name();
  return name.find("empty") != std::string::npos || name == "aten::resize_" || name == "aten::resize_as_" ||
         name == "aten::_resize_output_";
}

verify::Tolerance tolerance(const RunOptions& o, const std::string& op, c10::ScalarType t) {
  if (!o.policy) return verify::default_tolerance(t);
  const policy::OpPolicy* rule = o.policy->find(op);
  return policy::tolerance_for(*o.policy, rule ? *rule : o.policy->defaults, t);
}

bool low_precision_float(const at::Tensor& t) {
  return t.defined() && t.is_floating_point() && t.scalar_type() != at::kDouble;
}

// Whether argument `i` of `schema` is a ScalarType (optional or not).
bool dtype_argument(const c10::FunctionSchema& schema, size_t i) {
  if (i >= schema.arguments().size()) return false;
  c10::TypePtr t = schema.arguments()[i].type();
  if (auto o = t->cast<c10::OptionalType>()) t = o->getElementType();
  return t->kind() == c10::TypeKind::ScalarTypeType;
}

// Native on copies of the inputs whose floating-point tensors `convert` has changed into `to`, and whose
// floating-point dtype arguments name `to` (_log_softmax_backward_data's input_dtype, sum's dtype: a
// float64 reference that still named float32 was refused, and the case judged against native alone);
// empty when native cannot run so. The float64 reference, the lower-precision run and the reduction
// allowance are made this way.
Values native_on(const c10::OperatorHandle& op, const Values& inputs, c10::Device device, c10::ScalarType to,
                 const std::function<at::Tensor(const at::Tensor&)>& convert) {
  Spent spent(phase::kReference, true);
  Values args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    c10::IValue c = verify::deep_copy(inputs[i]);
    if (c.isTensor() && c.toTensor().defined() && c.toTensor().is_floating_point()) c = convert(c.toTensor());
    else if (c.isInt() && dtype_argument(op.schema(), i) &&
             c10::isFloatingType(static_cast<c10::ScalarType>(c.toInt())))
      c = c10::IValue(static_cast<int64_t>(to));
    args.push_back(std::move(c));
  }
  try {
    return call_native(op, args, device);
  } catch (const std::exception&) {
    return {};
  }
}

// The op run natively on the inputs with every float32/float16/bfloat16 tensor in float64; empty when
// the op cannot (then results are judged against native alone).
Values float64_reference(const c10::OperatorHandle& op, const Values& inputs, c10::Device device) {
  return native_on(op, inputs, device, at::kDouble, [](const at::Tensor& t) { return t.to(at::kDouble); });
}

// The unit roundoff (half the distance from 1 to the next value) of the precision a correct kernel
// accumulates a result of type `t` in: float32 for float32, float16 and bfloat16 results (as ATen
// does: a sum accumulated in bfloat16 is wrong, not differently rounded), float64 for float64.
double accumulation_roundoff(c10::ScalarType t) {
  return t == at::kDouble ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}

// The rounding error that a correct computation of result k in its own dtype may make in another
// order than native's (docs/replay.md): Higham and Mary's probabilistic bound for sums and dot
// products, sqrt(K) u sum|terms|, with u the accumulation's unit roundoff, K the input elements per result
// element (of the largest floating-point input) and sum|terms| the op in float64 on the absolute
// values of its inputs. Undefined where each result element comes from one input element (K <= 1:
// elementwise ops keep their own tolerance) or where the op cannot run on absolute values.
// `on_abs` keeps the op's run on absolute values for the call's other results (made once, when needed).
at::Tensor rounding_allowance(const c10::OperatorHandle& op, const Values& inputs, size_t k, const at::Tensor& result,
                              c10::Device device, std::optional<Values>& on_abs) {
  if (!result.defined() || result.numel() == 0 || !result.is_floating_point()) return {};
  int64_t largest = 0;
  for (const at::Tensor& t : verify::tensors_of(inputs))
    if (t.is_floating_point()) largest = std::max(largest, t.numel());
  const double terms = static_cast<double>(largest) / static_cast<double>(result.numel());
  if (terms <= 1) return {};
  if (!on_abs)
    on_abs = native_on(op, inputs, device, at::kDouble, [](const at::Tensor& t) { return t.abs().to(at::kDouble); });
  const Values& out = *on_abs;
  if (k >= out.size() || !out[k].isTensor() || out[k].toTensor().sizes() != result.sizes()) return {};
  return out[k].toTensor().abs() * (std::sqrt(terms) * accumulation_roundoff(result.scalar_type()));
}

// The op run natively with its floating-point inputs in `lower`, its result k in `from`; undefined
// when the op cannot.
at::Tensor native_in(const c10::OperatorHandle& op, const Values& inputs, size_t k, c10::ScalarType lower,
                     c10::ScalarType from, c10::Device device) {
  const Values out = native_on(op, inputs, device, lower, [&](const at::Tensor& t) { return t.to(lower); });
  if (k < out.size() && out[k].isTensor() && out[k].toTensor().defined()) return out[k].toTensor().to(from);
  return {};
}

// A wrong result that a lower precision explains, and only then (docs/integrity.md): within that
// precision's tolerance of the float64 reference, and either its values are values of that precision
// (rounded through it) or it equals, to its own dtype's tolerance, native's result computed in it.
// The precision and which of the two showed it; nullopt for a plain wrong answer.
std::optional<std::pair<c10::ScalarType, std::string>> computed_in_lower_precision(
    const c10::OperatorHandle& op, const Values& inputs, size_t k, const at::Tensor& actual, const at::Tensor& ref,
    verify::Tolerance own, const RunOptions& o) {
  for (c10::ScalarType lower : verify::lower_precisions(actual.scalar_type())) {
    if (!verify::within_tolerance_of(actual, ref, lower)) continue;
    if (verify::rounded_through(actual, ref, lower))
      return std::make_pair(lower, "its values are " + names::dtype(lower) + " values");
    const at::Tensor lowered = native_in(op, inputs, k, lower, actual.scalar_type(), o.device);
    if (lowered.defined() && lowered.sizes() == actual.sizes() && !verify::compare_tensors(lowered, actual, own))
      return std::make_pair(lower, "it equals native's result with " + names::dtype(lower) + " inputs");
  }
  return std::nullopt;
}

// Strides that differ from native's: a failure for in-place, out= and view results (the caller sees
// that memory) and with strict_strides (policy or --strict-strides); otherwise a note, since a fresh
// result in another layout is a correct result for every consumer of a functional op.
std::string layout_mismatch(const c10::OperatorHandle& op, const Values& native, const Values& generated,
                            const RunOptions& o, CaseResult& r) {
  const std::string why = verify::stride_mismatch(native, generated);
  if (why.empty()) return "";
  const policy::OpPolicy* rule = o.policy ? o.policy->find(r.op) : nullptr;
  const bool strict = o.strict_strides || (rule ? rule->strict_strides : o.policy && o.policy->defaults.strict_strides);
  if (strict || !verify::functional(op.schema())) return why;
  r.message += std::string(r.message.empty() ? "" : "; ") +
               "layout differs from native's (passes: a functional op; "
               "--strict-strides fails it): " +
               why;
  return "";
}

// Result `k` compared again without the elements native leaves unwritten, if it has any: nullopt
// when they were the whole difference.
std::optional<verify::Mismatch> compare_written(const at::Tensor& n, const at::Tensor& g,
                                                const verify::ElementMasks& undefined, size_t k,
                                                const verify::ToleranceFn& tol, const std::string& path,
                                                verify::ErrorStats* errors, std::string* note) {
  if (k >= undefined.size() || undefined[k].empty() || !undefined[k][0].defined() || n.sizes() != g.sizes())
    return verify::Mismatch{};
  const at::Tensor mask = undefined[k][0].to(n.device());
  auto m = verify::compare_values(n.clone().masked_fill_(mask, 0), g.clone().masked_fill_(mask, 0), tol, path, errors);
  if (!m)
    *note = path + ": " + std::to_string(mask.sum().item<int64_t>()) + " of " + std::to_string(mask.numel()) +
            " elements not compared (native leaves them unwritten: they hold what the memory held)";
  return m;
}

}  // namespace

verify::ElementMasks native_unwritten(const c10::OperatorHandle& op, const Values& inputs, const RunOptions& o) {
  try {
    Values a_args = copies(inputs), b_args = copies(inputs), a, b;
    {
      PoisonScope poison(kPoisonA, o.device);
      a = call_native(op, a_args, o.device);
    }
    {
      PoisonScope poison(kPoisonB, o.device);
      b = call_native(op, b_args, o.device);
    }
    Spent spent(phase::kIntegrity);
    return verify::differing_elements(a, b);
  } catch (const std::exception&) {
    return {};
  }
}

Finding compare(const CaseContext& c, const Values& inputs, const Values& native, const Values& generated,
                CaseResult& r) {
  Spent spent(phase::kCompare);
  const c10::OperatorHandle& op = c.op();
  const RunOptions& o = c.options;
  if (native.size() != generated.size())
    return failure(std::to_string(generated.size()) + " results, native gave " + std::to_string(native.size()));
  auto tol = [&](c10::ScalarType t) { return tolerance(o, r.op, t); };
  for (const auto& v : native) {  // the tolerance reported: the first tensor result's
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const verify::Tolerance t = tol(v.toTensor().scalar_type());
    r.rtol = t.rtol, r.atol = t.atol;
    break;
  }
  if (uninitialized_output(op)) {
    r.message = "values not compared: the op leaves its output uninitialized";
    for (size_t k = 0; k < native.size(); ++k) {
      if (!native[k].isTensor() || !generated[k].isTensor()) continue;
      auto m = verify::compare_tensors(native[k].toTensor(), generated[k].toTensor(), {INFINITY, INFINITY});
      if (m && m->what != "values") return failure("result " + std::to_string(k) + ": " + m->detail);
    }
    return failure(layout_mismatch(op, native, generated, o, r));
  }
  std::optional<Values> reference, on_abs;  // made only when some floating-point result needs them
  verify::ErrorStats errors;
  struct Keep {  // the errors are the case's whichever way compare returns
    CaseResult& r;
    verify::ErrorStats& e;
    ~Keep() {
      r.max_abs_error = std::max(r.max_abs_error, e.max_abs);
      r.max_rel_error = std::max(r.max_rel_error, e.max_rel);
    }
  } keep{r, errors};
  std::optional<verify::ElementMasks> undefined;  // made on the first mismatch
  for (size_t k = 0; k < native.size(); ++k) {
    const std::string path = "result " + std::to_string(k);
    verify::ErrorStats these;
    auto m = verify::compare_values(native[k], generated[k], tol, path, &these);
    if (m && m->what == "values" && native[k].isTensor() && generated[k].isTensor()) {
      if (!undefined) undefined = native_unwritten(op, inputs, o);
      std::string note;
      verify::ErrorStats written;
      if (!compare_written(native[k].toTensor(), generated[k].toTensor(), *undefined, k, tol, path, &written, &note)) {
        m.reset();
        these = written;
        r.message += std::string(r.message.empty() ? "" : "; ") + note;
      }
    }
    errors.add(these.max_abs, these.max_rel);
    if (!m) continue;
    const bool second_chance = m->what == "values" && native[k].isTensor() && low_precision_float(native[k].toTensor());
    if (!second_chance) return failure(m->detail);
    if (!reference) reference = float64_reference(op, inputs, o.device);
    if (k >= reference->size() || !(*reference)[k].isTensor()) return failure(m->detail);
    const at::Tensor& n = native[k].toTensor();
    const at::Tensor& ref = (*reference)[k].toTensor();
    const at::Tensor rounding = rounding_allowance(op, inputs, k, n, o.device, on_abs);
    if (auto m2 = verify::compare_with_reference(n, generated[k].toTensor(), ref, tol(n.scalar_type()), rounding)) {
      if (auto lower =
              computed_in_lower_precision(op, inputs, k, generated[k].toTensor(), ref, tol(n.scalar_type()), o)) {
        return caught(verify::Flag::PrecisionDowngrade,
                      "result " + std::to_string(k) + ": computed in " + names::dtype(lower->first) + ", not " +
                          names::dtype(n.scalar_type()) + " (" + lower->second + "): " + m2->detail);
      }
      return failure("result " + std::to_string(k) + ": " + m2->detail);
    }
    r.message = "outside tolerance of native, but no less accurate than native against a float64 reference";
  }
  return failure(layout_mismatch(op, native, generated, o, r));
}

}  // namespace bb::replay
