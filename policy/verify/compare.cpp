#include "policy/verify/compare.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

#include "tracer/names.h"

namespace bb::verify {
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

// Both flattened, as float64 on `device` (complex as pairs of reals): comparing on the results' own
// device copies three numbers back, not the results (docs/performance.md, replay throughput).
std::pair<at::Tensor, at::Tensor> flat_doubles(const at::Tensor& expected, const at::Tensor& actual,
                                               c10::Device device) {
  at::Tensor e = expected.detach().to(device), a = actual.detach().to(device);
  if (e.is_complex()) {
    e = at::view_as_real(e.resolve_conj());
    a = at::view_as_real(a.resolve_conj());
  }
  return {e.to(at::kDouble).reshape({-1}), a.to(at::kDouble).reshape({-1})};
}

struct Measured {
  bool all_within = false;          // every element within tolerance (or equal, or NaN where expected has NaN)
  double max_abs = 0, max_rel = 0;  // over elements whose difference is finite (rel: see measure())
  at::Tensor ok;                    // per element: within tolerance (for the report of a mismatch)
};

// One pass over flat float64 tensors on their device; one copy of three numbers back. The relative
// error is taken against |expected| but never below atol / rtol, the magnitude under which the
// tolerance is absolute: an expected 0 next to 1e-6 is an absolute error of 1e-6, not a relative
// error of 1e300 (what the shadow-mode summary printed for GPT-2's addmm before).
Measured measure(const at::Tensor& e, const at::Tensor& a, Tolerance tol) {
  const at::Tensor diff = (e - a).abs();
  const at::Tensor finite = diff.isfinite();
  const at::Tensor zero = at::zeros({}, diff.options());
  const at::Tensor d = at::where(finite, diff, zero);
  const double floor = tol.rtol > 0 && tol.atol > 0 ? tol.atol / tol.rtol : std::numeric_limits<double>::min();
  const at::Tensor rel = at::where(finite, d / e.abs().clamp_min(floor), zero);
  const at::Tensor ok = (e == a) | (e.isnan() & a.isnan()) | (diff <= tol.atol + tol.rtol * e.abs());
  const at::Tensor three = at::stack({d.max(), rel.max(), ok.all().to(at::kDouble)}).cpu();
  const double* p = three.const_data_ptr<double>();
  return {p[2] != 0, p[0], p[1], ok};
}

}  // namespace

void ErrorStats::add(double abs_error, double rel_error) {
  max_abs = std::max(max_abs, abs_error);
  max_rel = std::max(max_rel, rel_error);
}

std::optional<Mismatch> compare_tensors(const at::Tensor& expected, const at::Tensor& actual, Tolerance tol,
                                        ErrorStats* stats) {
  if (expected.defined() != actual.defined())
    return make("kind", expected.defined() ? "expected a tensor, got an undefined one" : "expected no tensor");
  if (!expected.defined()) return std::nullopt;
  if (expected.sizes() != actual.sizes())
    return make("shape", "expected " + shape_text(expected) + ", got " + shape_text(actual));
  if (expected.scalar_type() != actual.scalar_type())
    return make("dtype", "expected " + shape_text(expected) + ", got " + shape_text(actual));
  if (expected.numel() == 0) return std::nullopt;
  // No bound on the values and no errors wanted: nothing about them can matter (uninitialized outputs,
  // the structure check before a second chance), so they are not read (float64 copies of a large
  // result, on every timed pair of an `empty` op).
  if (!stats && std::isinf(tol.atol) && std::isinf(tol.rtol)) return std::nullopt;
  // Equal element for element (one op, the common case: a deterministic kernel, native against native)
  if (expected.device() == actual.device() && at::equal(expected, actual)) {
    if (stats) stats->add(0, 0);
    return std::nullopt;
  }
  at::Tensor e, a;
  Measured found;
  try {
    std::tie(e, a) = flat_doubles(expected, actual, expected.device());
    found = measure(e, a, tol);
  } catch (const c10::OutOfMemoryError&) {  // float64 copies of large results on a small GPU: on the host
    std::tie(e, a) = flat_doubles(expected, actual, c10::Device(c10::kCPU));
    found = measure(e, a, tol);
  }
  if (stats) stats->add(found.max_abs, found.max_rel);
  if (found.all_within) return std::nullopt;
  Mismatch m = make("values", "");
  m.max_abs = found.max_abs;
  m.max_rel = found.max_rel;
  at::Tensor bad = (~found.ok).nonzero().cpu();
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
                                               const at::Tensor& reference, Tolerance tol, const at::Tensor& rounding) {
  if (auto m = compare_tensors(native, actual, {INFINITY, INFINITY}); m && m->what != "values") return m;
  if (!native.defined() || native.numel() == 0) return std::nullopt;
  if (!reference.defined() || reference.sizes() != native.sizes()) return compare_tensors(native, actual, tol);
  auto [n, a] = flat_doubles(native, actual, native.device());
  at::Tensor r = reference.detach().to(n.device()).to(at::kDouble).reshape({-1});
  at::Tensor native_err = (n - r).abs();
  native_err = native_err.masked_select(native_err.isfinite());
  const double yardstick = native_err.numel() ? native_err.max().item<double>() : 0.0;
  at::Tensor same = (a == n) | (a.isnan() & n.isnan()) | (a == r) | (a.isnan() & r.isnan());
  at::Tensor allowed = tol.atol + tol.rtol * r.abs() + 2 * yardstick;
  if (rounding.defined() && rounding.sizes() == native.sizes())
    allowed = allowed + rounding.detach().to(n.device()).to(at::kDouble).reshape({-1}).nan_to_num(0, 0, 0);
  at::Tensor ok = same | ((a - r).abs() <= allowed);
  if (ok.all().item<bool>()) return std::nullopt;
  Mismatch m = make("values", "");
  const Measured against_reference = measure(r, a, {0, 0});
  m.max_abs = against_reference.max_abs;
  m.max_rel = against_reference.max_rel;
  at::Tensor bad = (~ok).nonzero().cpu();
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

bool all_equal(const std::vector<std::pair<at::Tensor, at::Tensor>>& pairs) {
  std::vector<at::Tensor> differs;  // per device pair: a bool on the device, read once below
  for (const auto& [x, y] : pairs) {
    if (x.defined() != y.defined()) return false;
    if (!x.defined()) continue;
    if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type() || x.device() != y.device()) return false;
    if (x.numel() == 0) continue;
    if (x.is_cpu()) {
      if (!at::equal(x, y)) return false;
      continue;
    }
    differs.push_back(at::ne(x, y).any().reshape({1}));
  }
  if (differs.empty()) return true;
  if (differs.size() == 1) return !differs[0].item<bool>();
  return !at::cat(differs).any().item<bool>();
}

bool tensor_pairs(const c10::IValue& a, const c10::IValue& b, std::vector<std::pair<at::Tensor, at::Tensor>>& out) {
  if (a.isTensor() && b.isTensor()) {
    out.emplace_back(a.toTensor(), b.toTensor());
    return true;
  }
  if ((a.isList() && b.isList()) || (a.isTuple() && b.isTuple())) {
    auto as = a.isList() ? a.toListRef().vec() : a.toTupleRef().elements().vec();
    auto bs = b.isList() ? b.toListRef().vec() : b.toTupleRef().elements().vec();
    if (as.size() != bs.size()) return false;
    for (size_t k = 0; k < as.size(); ++k)
      if (!tensor_pairs(as[k], bs[k], out)) return false;
    return true;
  }
  return false;
}

std::optional<Mismatch> compare_values(const c10::IValue& expected, const c10::IValue& actual,
                                       const ToleranceFn& tolerance, const std::string& path, ErrorStats* stats) {
  auto at_path = [&](std::optional<Mismatch> m) {
    if (m) m->detail = path + ": " + m->detail;
    return m;
  };
  if (expected.isTensor() && actual.isTensor()) {
    const auto& e = expected.toTensor();
    return at_path(compare_tensors(e, actual.toTensor(), tolerance(e.defined() ? e.scalar_type() : at::kFloat), stats));
  }
  if ((expected.isList() && actual.isList()) || (expected.isTuple() && actual.isTuple())) {
    // Equal throughout (native against itself, a deterministic kernel): one read for the whole list.
    std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
    if (tensor_pairs(expected, actual, pairs) && pairs.size() > 1 && all_equal(pairs)) {
      if (stats)
        for (const auto& [e, a] : pairs)
          if (e.defined() && e.numel()) stats->add(0, 0);
      return std::nullopt;
    }
    auto ev = expected.isList() ? expected.toListRef().vec() : expected.toTupleRef().elements().vec();
    auto av = actual.isList() ? actual.toListRef().vec() : actual.toTupleRef().elements().vec();
    if (ev.size() != av.size())
      return at_path(make("count", std::to_string(av.size()) + " elements, expected " + std::to_string(ev.size())));
    for (size_t k = 0; k < ev.size(); ++k)
      if (auto m = compare_values(ev[k], av[k], tolerance, path + "[" + std::to_string(k) + "]", stats)) return m;
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

Tolerance default_tolerance(c10::ScalarType t) {
  switch (t) {  // torch.testing.assert_close's defaults
    case c10::ScalarType::Half: return {1e-3, 1e-5};
    case c10::ScalarType::BFloat16: return {1.6e-2, 1e-5};
    case c10::ScalarType::Float:
    case c10::ScalarType::ComplexFloat: return {1.3e-6, 1e-5};
    case c10::ScalarType::Double:
    case c10::ScalarType::ComplexDouble: return {1e-7, 1e-7};
    default: return {0, 0};  // integers and bool: exact
  }
}

std::string stride_mismatch(const std::vector<c10::IValue>& native, const std::vector<c10::IValue>& generated) {
  for (size_t k = 0; k < native.size() && k < generated.size(); ++k) {
    if (!native[k].isTensor() || !generated[k].isTensor()) continue;
    const at::Tensor &n = native[k].toTensor(), &g = generated[k].toTensor();
    if (!n.defined() || !g.defined() || n.sizes() != g.sizes()) continue;
    for (int64_t d = 0; d < n.dim(); ++d) {
      if (n.size(d) > 1 && n.stride(d) != g.stride(d)) {
        std::ostringstream s;
        s << "result " << k << " has strides " << g.strides() << ", native " << n.strides();
        return s.str();
      }
    }
  }
  return "";
}

}  // namespace bb::verify
