#include "policy/verify/result_checks.h"

#include <ATen/ATen.h>

#include <cstring>
#include <sstream>

#include "policy/verify/compare.h"
#include "policy/verify/integrity.h"

namespace bb::verify {
namespace {

// The tensors of one result: itself, or each element of a list (undefined ones kept in place).
std::vector<at::Tensor> parts(const c10::IValue& v) {
  if (v.isTensor()) return {v.toTensor()};
  std::vector<at::Tensor> out;
  if (v.isList())
    for (const auto& e : v.toListRef()) out.push_back(e.isTensor() ? e.toTensor() : at::Tensor());
  return out;
}

// The elements whose bytes differ (each element's bytes compared as a whole), or undefined if none do.
at::Tensor differing(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type() || a.numel() == 0 ||
      a.is_quantized())
    return {};
  auto bytes = [](const at::Tensor& t) {
    return t.detach().cpu().contiguous().reshape({-1}).view(at::kByte).reshape({t.numel(), t.element_size()});
  };
  at::Tensor m = bytes(a).ne(bytes(b)).any(1).reshape(a.sizes());
  return m.any().item<bool>() ? m : at::Tensor();
}

}  // namespace

ElementMasks differing_elements(const Values& a, const Values& b) {
  ElementMasks out(std::min(a.size(), b.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    auto pa = parts(a[k]), pb = parts(b[k]);
    for (size_t e = 0; e < pa.size() && e < pb.size(); ++e) out[k].push_back(differing(pa[e], pb[e]));
  }
  return out;
}

std::string unwritten_elements(const Values& a, const Values& b, const ElementMasks& native_unwritten) {
  const ElementMasks masks = differing_elements(a, b);
  for (size_t k = 0; k < masks.size(); ++k) {
    for (size_t e = 0; e < masks[k].size(); ++e) {
      at::Tensor m = masks[k][e];
      if (!m.defined()) continue;
      if (k < native_unwritten.size() && e < native_unwritten[k].size() && native_unwritten[k][e].defined())
        m = m & ~native_unwritten[k][e];
      const int64_t differ = m.sum().item<int64_t>();
      if (!differ) continue;
      const int64_t first = m.reshape({-1}).nonzero()[0][0].item<int64_t>();
      std::ostringstream s;
      s << "result " << k;
      if (!a[k].isTensor()) s << "[" << e << "]";
      s << ": " << differ << " of " << m.numel() << " elements depend on what the memory held before the call "
        << "(first at flat index " << first << "): the kernel did not write them";
      return s.str();
    }
  }
  return "";
}

bool bitwise_equal(const Values& a, const Values& b) {
  auto ta = verify::tensors_of(a), tb = verify::tensors_of(b);
  if (ta.size() != tb.size()) return false;
  for (size_t k = 0; k < ta.size(); ++k) {
    if (ta[k].sizes() != tb[k].sizes() || ta[k].scalar_type() != tb[k].scalar_type()) return false;
    at::Tensor x = ta[k].detach().cpu().contiguous(), y = tb[k].detach().cpu().contiguous();
    if (std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) != 0) return false;
  }
  return true;
}

std::vector<c10::ScalarType> lower_precisions(c10::ScalarType t) {
  if (t == at::kFloat || t == at::kDouble) return {at::kHalf, at::kBFloat16};
  if (t == at::kHalf) return {at::kBFloat16};
  return {};
}

bool within_tolerance_of(const at::Tensor& actual, const at::Tensor& reference, c10::ScalarType lower) {
  if (!actual.defined() || !reference.defined() || actual.sizes() != reference.sizes()) return false;
  return !verify::compare_tensors(reference.to(actual.scalar_type()), actual, verify::default_tolerance(lower));
}

bool rounded_through(const at::Tensor& actual, const at::Tensor& reference, c10::ScalarType lower) {
  if (!actual.defined() || !reference.defined() || actual.sizes() != reference.sizes()) return false;
  auto round_trip = [&](const at::Tensor& x) { return x.to(lower).to(x.scalar_type()); };
  const at::Tensor a = actual.detach().cpu().reshape({-1});
  const at::Tensor r = reference.detach().cpu().to(actual.scalar_type()).reshape({-1});
  const at::Tensor telling = r.isfinite() & (round_trip(r) != r);  // a value of `lower` says nothing
  if (telling.sum().item<int64_t>() < 16) return false;
  const at::Tensor is_value = (round_trip(a) == a) | a.isnan();
  return (is_value | ~telling).all().item<bool>();
}

}  // namespace bb::verify
