#include "policy/compare.h"

#include <ATen/ATen.h>

#include <cmath>
#include <tuple>
#include <limits>
#include <sstream>

#include "tracer/names.h"

namespace bb::policy {
namespace {

std::string shape_text(const at::Tensor& t) {
  std::ostringstream s;
  s << names::dtype(t.scalar_type()) << t.sizes();
  return s.str();
}

Mismatch make(std::string what, std::string detail) {
  Mismatch m;
  m.what = std::move(what);
  m.detail = std::move(detail);
  return m;
}

}  // namespace

namespace {

// Both as flat float64 on the CPU (complex as pairs of reals).
std::pair<at::Tensor, at::Tensor> flat_doubles(const at::Tensor& expected, const at::Tensor& actual) {
  at::Tensor e = expected.detach().to(at::kCPU), a = actual.detach().to(at::kCPU);
  if (e.is_complex()) {
    e = at::view_as_real(e.resolve_conj());
    a = at::view_as_real(a.resolve_conj());
  }
  return {e.to(at::kDouble).reshape({-1}), a.to(at::kDouble).reshape({-1})};
}

std::pair<double, double> stats(const at::Tensor& e, const at::Tensor& a) {
  at::Tensor diff = (e - a).abs();
  at::Tensor finite = diff.isfinite();
  if (!finite.any().item<bool>()) return {0, 0};
  at::Tensor d = diff.masked_select(finite);
  at::Tensor rel = d / e.abs().masked_select(finite).clamp_min(std::numeric_limits<double>::min());
  return {d.max().item<double>(), rel.max().item<double>()};
}

}  // namespace

std::pair<double, double> error_stats(const at::Tensor& expected, const at::Tensor& actual) {
  if (!expected.defined() || !actual.defined() || expected.sizes() != actual.sizes() ||
      expected.scalar_type() != actual.scalar_type() || expected.numel() == 0)
    return {0, 0};
  auto [e, a] = flat_doubles(expected, actual);
  return stats(e, a);
}

std::optional<Mismatch> compare_tensors(const at::Tensor& expected, const at::Tensor& actual, Tolerance tol) {
  if (expected.defined() != actual.defined())
    return make("kind", expected.defined() ? "expected a tensor, got an undefined one" : "expected no tensor");
  if (!expected.defined()) return std::nullopt;
  if (expected.sizes() != actual.sizes())
    return make("shape", "expected " + shape_text(expected) + ", got " + shape_text(actual));
  if (expected.scalar_type() != actual.scalar_type())
    return make("dtype", "expected " + shape_text(expected) + ", got " + shape_text(actual));
  if (expected.numel() == 0) return std::nullopt;
  auto [e, a] = flat_doubles(expected, actual);
  at::Tensor diff = (e - a).abs();
  at::Tensor ok = (e == a) | (e.isnan() & a.isnan()) | (diff <= tol.atol + tol.rtol * e.abs());
  if (ok.all().item<bool>()) return std::nullopt;
  Mismatch m = make("values", "");
  std::tie(m.max_abs, m.max_rel) = stats(e, a);
  at::Tensor bad = (~ok).nonzero();
  m.first_index = bad[0][0].item<int64_t>();
  std::ostringstream s;
  s << shape_text(expected) << ": " << bad.size(0) << " of " << e.numel() << " elements differ; first at flat index "
    << m.first_index << " (expected " << e[m.first_index].item<double>() << ", got " << a[m.first_index].item<double>()
    << "); max abs error " << m.max_abs << ", max rel error " << m.max_rel << " (rtol " << tol.rtol << ", atol "
    << tol.atol << ")";
  m.detail = s.str();
  return m;
}

std::optional<Mismatch> compare_with_reference(const at::Tensor& native, const at::Tensor& actual,
                                               const at::Tensor& reference, Tolerance tol,
                                               const at::Tensor& rounding) {
  if (auto m = compare_tensors(native, actual, {INFINITY, INFINITY}); m && m->what != "values") return m;
  if (!native.defined() || native.numel() == 0) return std::nullopt;
  if (!reference.defined() || reference.sizes() != native.sizes()) return compare_tensors(native, actual, tol);
  auto [n, a] = flat_doubles(native, actual);
  at::Tensor r = reference.detach().to(at::kCPU).to(at::kDouble).reshape({-1});
  at::Tensor native_err = (n - r).abs();
  native_err = native_err.masked_select(native_err.isfinite());
  const double yardstick = native_err.numel() ? native_err.max().item<double>() : 0.0;
  at::Tensor same = (a == n) | (a.isnan() & n.isnan()) | (a == r) | (a.isnan() & r.isnan());
  at::Tensor allowed = tol.atol + tol.rtol * r.abs() + 2 * yardstick;
  if (rounding.defined() && rounding.sizes() == native.sizes())
    allowed = allowed + rounding.detach().to(at::kCPU).to(at::kDouble).reshape({-1}).nan_to_num(0, 0, 0);
  at::Tensor ok = same | ((a - r).abs() <= allowed);
  if (ok.all().item<bool>()) return std::nullopt;
  Mismatch m = make("values", "");
  std::tie(m.max_abs, m.max_rel) = stats(r, a);
  at::Tensor bad = (~ok).nonzero();
  m.first_index = bad[0][0].item<int64_t>();
  std::ostringstream s;
  s << shape_text(native) << ": " << bad.size(0) << " of " << n.numel() << " elements differ from native and from the "
    << "float64 reference; first at flat index " << m.first_index << " (native " << n[m.first_index].item<double>()
    << ", float64 " << r[m.first_index].item<double>() << ", got " << a[m.first_index].item<double>()
    << "); max abs error against float64 " << m.max_abs << ", native's " << yardstick << " (rtol " << tol.rtol
    << ", atol " << tol.atol << ", plus twice native's error"
    << (rounding.defined() ? ", plus the rounding of a sum in another order)" : ")");
  m.detail = s.str();
  return m;
}

std::optional<Mismatch> compare_values(const c10::IValue& expected, const c10::IValue& actual,
                                       const ToleranceFn& tolerance, const std::string& path) {
  auto at_path = [&](std::optional<Mismatch> m) {
    if (m) m->detail = path + ": " + m->detail;
    return m;
  };
  if (expected.isTensor() && actual.isTensor()) {
    const auto& e = expected.toTensor();
    return at_path(compare_tensors(e, actual.toTensor(), tolerance(e.defined() ? e.scalar_type() : at::kFloat)));
  }
  if ((expected.isList() && actual.isList()) || (expected.isTuple() && actual.isTuple())) {
    auto ev = expected.isList() ? expected.toListRef().vec() : expected.toTupleRef().elements().vec();
    auto av = actual.isList() ? actual.toListRef().vec() : actual.toTupleRef().elements().vec();
    if (ev.size() != av.size())
      return at_path(make("count", std::to_string(av.size()) + " elements, expected " + std::to_string(ev.size())));
    for (size_t k = 0; k < ev.size(); ++k)
      if (auto m = compare_values(ev[k], av[k], tolerance, path + "[" + std::to_string(k) + "]")) return m;
    return std::nullopt;
  }
  if (expected.tagKind() != actual.tagKind())
    return at_path(make("kind", "expected a " + expected.tagKind() + ", got a " + actual.tagKind()));
  if (expected.isDouble()) {
    Tolerance t = tolerance(at::kDouble);
    double e = expected.toDouble(), a = actual.toDouble();
    if (e == a || (std::isnan(e) && std::isnan(a)) || std::abs(e - a) <= t.atol + t.rtol * std::abs(e))
      return std::nullopt;
    return at_path(make("values", "expected " + std::to_string(e) + ", got " + std::to_string(a)));
  }
  if (expected.isInt() || expected.isBool()) {
    const int64_t e = expected.isInt() ? expected.toInt() : expected.toBool();
    const int64_t a = actual.isInt() ? actual.toInt() : actual.toBool();
    if (e == a) return std::nullopt;
    return at_path(make("values", "expected " + std::to_string(e) + ", got " + std::to_string(a)));
  }
  return std::nullopt;  // other kinds (None, strings...) carry no numeric result to compare
}

}  // namespace bb::policy
