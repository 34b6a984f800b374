#include "policy/verify/values.h"

#include <ATen/ATen.h>

namespace bb::verify {

c10::IValue deep_copy(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return v;
    const int64_t storage = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
    at::Tensor whole = t.as_strided({storage}, {1}, 0).clone();
    at::Tensor out = at::empty({0}, whole.options());
    out.set_(whole.storage(), t.storage_offset(), t.sizes(), t.strides());
    return out;
  }
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const auto& t : v.toTensorVector()) out.push_back(deep_copy(t).toTensor());
    return out;
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const auto& x : v.toListRef()) out.push_back(deep_copy(x));
    return out;
  }
  return v;
}

Values deep_copies(const Values& values) {
  Values out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(deep_copy(v));
  return out;
}

}  // namespace bb::verify
