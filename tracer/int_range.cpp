#include "tracer/int_range.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace bb::tracer {
namespace {

template <class T>
int64_t clamp64(T v) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                          : static_cast<int64_t>(v);
  } else {
    return static_cast<int64_t>(v);
  }
}

// Walks every element of a strided tensor, innermost dimension fastest.
template <class T>
IntRange scan(const T* base, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::lowest();
  const size_t dims = sizes.size();
  if (dims == 0) return {clamp64(*base), clamp64(*base)};
  std::vector<int64_t> idx(dims, 0);
  const int64_t inner = sizes[dims - 1], inner_stride = strides[dims - 1];
  const T* row = base;
  while (true) {
    for (int64_t k = 0; k < inner; ++k) {
      T v = row[k * inner_stride];
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    size_t d = dims - 1;
    while (d-- > 0) {  // advance the outer index like an odometer
      row += strides[d];
      if (++idx[d] < sizes[d]) break;
      row -= strides[d] * sizes[d];
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  return {clamp64(lo), clamp64(hi)};
}

template <class T>
IntRange scan_tensor(const c10::TensorImpl* impl) {
  return scan(static_cast<const T*>(impl->data()), impl->sizes(), impl->strides());
}

}  // namespace

bool is_plain_dense(const at::Tensor& t) {
  if (!t.defined()) return false;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  static const c10::DispatchKeySet wrappers({
      c10::DispatchKey::Python,
      c10::DispatchKey::PythonTLSSnapshot,
      c10::DispatchKey::Functionalize,
      c10::DispatchKey::FuncTorchBatched,
      c10::DispatchKey::FuncTorchGradWrapper,
      c10::DispatchKey::BatchedNestedTensor,
      c10::DispatchKey::ZeroTensor,
      c10::DispatchKey::Negative,
      c10::DispatchKey::Conjugate,
  });
  const auto dev = impl->device_type();
  return (dev == c10::kCPU || dev == c10::kCUDA) && impl->layout() == c10::kStrided && !impl->is_nested() &&
         !impl->has_symbolic_sizes_strides() && !impl->key_set().has_any(wrappers);
}

bool wants_range(c10::ScalarType t) { return c10::isIntegralType(t, /*includeBool=*/false); }

std::optional<IntRange> cpu_int_range(const at::Tensor& t) {
  if (!is_plain_dense(t) || !t.is_cpu()) return std::nullopt;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  try {
    if (impl->numel() == 0 || !impl->has_storage() || impl->data() == nullptr) return std::nullopt;
    switch (impl->dtype().toScalarType()) {
      case c10::ScalarType::Byte: return scan_tensor<uint8_t>(impl);
      case c10::ScalarType::Char: return scan_tensor<int8_t>(impl);
      case c10::ScalarType::Short: return scan_tensor<int16_t>(impl);
      case c10::ScalarType::Int: return scan_tensor<int32_t>(impl);
      case c10::ScalarType::Long: return scan_tensor<int64_t>(impl);
      case c10::ScalarType::UInt16: return scan_tensor<uint16_t>(impl);
      case c10::ScalarType::UInt32: return scan_tensor<uint32_t>(impl);
      case c10::ScalarType::UInt64: return scan_tensor<uint64_t>(impl);
      default: return std::nullopt;
    }
  } catch (...) {  // storage that refuses access (functional/fake wrappers)
    return std::nullopt;
  }
}

}  // namespace bb::tracer
