#include "tracer/arg_key.h"

#include <algorithm>
#include <cstring>

#include "tracer/names.h"

namespace bb::tracer {
namespace {

enum Tag : uint64_t {
  kNone = 1,
  kTensor,
  kInt,
  kDouble,
  kBool,
  kComplex,
  kString,
  kIntList,
  kDoubleList,
  kBoolList,
  kTensorList,
  kList,
  kDevice,
  kSymbolic,
  kGenerator,
  kOther,
};

// Tensor flags in the key.
constexpr uint64_t kFlagSymbolic = 1, kFlagNested = 2, kFlagNoSizes = 4;

uint64_t header(Tag tag, uint64_t aux) { return static_cast<uint64_t>(tag) | (aux << 8); }

uint64_t double_bits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

uint64_t* copy_words(c10::IntArrayRef a, uint64_t* to) {
  for (int64_t x : a) *to++ = static_cast<uint64_t>(x);
  return to;
}

void encode_tensor(const at::Tensor& t, KeyWords& out) {
  if (!t.defined()) {  // an undefined tensor is how C++ passes None for Tensor?
    out.push_back(kNone);
    return;
  }
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  uint64_t flags = 0;
  if (impl->has_symbolic_sizes_strides()) flags |= kFlagSymbolic;
  if (impl->is_nested()) flags |= kFlagNested;
  const auto layout = impl->layout();
  const bool strided = layout == c10::kStrided && !flags;
  if (flags) flags |= kFlagNoSizes;
  const c10::Device dev = impl->device();
  const uint64_t dev_word =
      (static_cast<uint64_t>(dev.type()) << 8) | static_cast<uint64_t>(static_cast<uint8_t>(dev.index()));
  const uint64_t dim = flags ? 0 : impl->dim();
  const uint64_t head = header(kTensor, static_cast<uint64_t>(impl->dtype().toScalarType()) |
                                            (static_cast<uint64_t>(layout) << 8) | (dim << 16) | (flags << 32));
  // Header, device, then sizes unless flagged, then strides and storage offset if strided. Read before
  // appending: sizes() may throw (encode_key then keys the value as opaque).
  const c10::IntArrayRef sizes = flags ? c10::IntArrayRef() : impl->sizes();
  const c10::IntArrayRef strides = strided ? impl->strides() : c10::IntArrayRef();
  uint64_t* w = out.append(2 + sizes.size() + (strided ? strides.size() + 1 : 0));
  w[0] = head;
  w[1] = dev_word;
  w = copy_words(sizes, w + 2);
  if (strided) *copy_words(strides, w) = static_cast<uint64_t>(impl->storage_offset());
}

void encode_string(const std::string& s, KeyWords& out) {
  uint64_t* w = out.append(1 + (s.size() + 7) / 8);
  *w++ = header(kString, s.size());
  for (size_t k = 0; k < s.size(); k += 8) {
    uint64_t word = 0;
    std::memcpy(&word, s.data() + k, std::min<size_t>(8, s.size() - k));
    *w++ = word;
  }
}

void encode_list_or_other(const c10::IValue& v, KeyWords& out, bool blind);

// Values the tracer does not record in detail still get a stable code per kind.
uint64_t other_code(const c10::IValue& v) { return std::hash<std::string>()(v.tagKind()) & 0xffffffffu; }

// blind: float values encoded as 0 (their number stays), for the key of a signature's float variants.
void encode_unchecked(const c10::IValue& v, KeyWords& out, bool blind) {
  if (v.isTensor()) {
    encode_tensor(v.toTensor(), out);
  } else if (v.isInt()) {
    uint64_t* w = out.append(2);
    w[0] = kInt;
    w[1] = static_cast<uint64_t>(v.toInt());
  } else if (v.isNone()) {
    out.push_back(kNone);
  } else if (v.isBool()) {
    out.push_back(header(kBool, v.toBool()));
  } else if (v.isDouble()) {
    uint64_t* w = out.append(2);
    w[0] = kDouble;
    w[1] = blind ? 0 : double_bits(v.toDouble());
  } else if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    out.push_back(kComplex);
    out.push_back(blind ? 0 : double_bits(c.real()));
    out.push_back(blind ? 0 : double_bits(c.imag()));
  } else if (v.isString()) {
    encode_string(v.toStringRef(), out);
  } else if (v.isDevice()) {
    auto d = v.toDevice();
    out.push_back(header(kDevice, (static_cast<uint64_t>(d.type()) << 8) | static_cast<uint8_t>(d.index())));
  } else if (v.isSymInt() || v.isSymFloat() || v.isSymBool()) {
    out.push_back(kSymbolic);
  } else if (v.isGenerator()) {
    out.push_back(kGenerator);
  } else {
    encode_list_or_other(v, out, blind);
  }
}
// Lists are read through toListRef(): the typed accessors (toIntList(), toTensorList(), get(k)) copy
// reference-counted handles, an atomic increment and decrement per list and per tensor on every call.
void encode_list_or_other(const c10::IValue& v, KeyWords& out, bool blind) {
  if (!v.isList()) {
    out.push_back(header(kOther, other_code(v)));
    return;
  }
  const auto list = v.toListRef();
  if (v.isIntList()) {
    uint64_t* w = out.append(1 + list.size());
    *w++ = header(kIntList, list.size());
    for (const auto& x : list) *w++ = static_cast<uint64_t>(x.toInt());
  } else if (v.isDoubleList()) {
    uint64_t* w = out.append(1 + list.size());
    *w++ = header(kDoubleList, list.size());
    for (const auto& x : list) *w++ = blind ? 0 : double_bits(x.toDouble());
  } else if (v.isBoolList()) {
    out.push_back(header(kBoolList, list.size()));
    uint64_t bits = 0;
    for (size_t k = 0; k < list.size(); ++k) {
      if (list[k].toBool()) bits |= uint64_t{1} << (k % 64);
      if (k % 64 == 63 || k + 1 == list.size()) out.push_back(std::exchange(bits, 0));
    }
  } else if (v.isTensorList()) {
    out.push_back(header(kTensorList, list.size()));
    for (const auto& x : list) encode_tensor(x.toTensor(), out);
  } else {
    out.push_back(header(kList, list.size()));
    for (const auto& x : list) encode_unchecked(x, out, blind);
  }
}

}  // namespace

void encode_key(const c10::IValue& v, KeyWords& out, bool blind_floats) {
  const size_t mark = out.size();
  try {
    encode_unchecked(v, out, blind_floats);
  } catch (...) {  // e.g. a tensor subclass whose sizes() raises: record it as opaque
    out.truncate(mark);
    out.push_back(header(kOther, other_code(v)));
  }
}

void KeyWords::grow(size_t n) {
  const size_t capacity = std::max<size_t>({64, 2 * capacity_, size_ + n});
  std::unique_ptr<uint64_t[]> words(new uint64_t[capacity]);  // not initialized: written before read
  if (size_) std::memcpy(words.get(), words_.get(), size_ * sizeof(uint64_t));
  words_ = std::move(words);
  capacity_ = capacity;
}

// Four independent lanes, so that a long key (a foreach op's tensor list) hashes at about a word a
// cycle rather than one multiply's latency a word; short keys take the tail loop. The hash only picks
// the bucket: equal keys are decided by comparing the words.
uint64_t hash_key(const uint64_t* words, size_t n) {
  constexpr uint64_t kMul = 0xBF58476D1CE4E5B9ull;
  auto mix = [](uint64_t h, uint64_t w) {
    h = (h ^ w) * kMul;
    return h ^ (h >> 31);
  };
  uint64_t a = 0x9E3779B97F4A7C15ull ^ n, b = 0x94D049BB133111EBull, c = 0xD6E8FEB86659FD93ull,
           d = 0xA0761D6478BD642Full;
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    a = mix(a, words[k]);
    b = mix(b, words[k + 1]);
    c = mix(c, words[k + 2]);
    d = mix(d, words[k + 3]);
  }
  for (; k < n; ++k) a = mix(a, words[k]);
  return mix(mix(mix(a, b), c), d);
}

// ------------------------------------------------------------------ describing (slow path)

namespace {

using trace::ArgKind;
using trace::ArgValue;
using trace::TensorMeta;

c10::TypePtr unwrap_optional(c10::TypePtr t) {
  while (t && t->kind() == c10::TypeKind::OptionalType) t = t->castRaw<c10::OptionalType>()->getElementType();
  return t;
}

// Enum-valued arguments are Ints at run time; the declared type says which enum.
std::optional<ArgKind> enum_kind(const c10::Argument* a) {
  if (!a) return std::nullopt;
  auto t = unwrap_optional(a->real_type());
  if (!t) return std::nullopt;
  switch (t->kind()) {
    case c10::TypeKind::ScalarTypeType: return ArgKind::ScalarType;
    case c10::TypeKind::LayoutType: return ArgKind::Layout;
    case c10::TypeKind::MemoryFormatType: return ArgKind::MemoryFormat;
    default: return std::nullopt;
  }
}

std::string enum_name(ArgKind kind, int64_t v) {
  switch (kind) {
    case ArgKind::ScalarType: return names::dtype(static_cast<c10::ScalarType>(v));
    case ArgKind::Layout: return names::layout(static_cast<c10::Layout>(v));
    default: return names::memory_format(static_cast<c10::MemoryFormat>(v));
  }
}

std::optional<TensorMeta> maybe_tensor(const at::Tensor& t) {
  if (!t.defined()) return std::nullopt;
  return describe_tensor(t);
}

void describe_list(const c10::IValue& v, ArgValue& a) {
  if (v.isIntList()) {
    a.kind = ArgKind::IntList;
    a.ints = v.toIntVector();
  } else if (v.isDoubleList()) {
    a.kind = ArgKind::FloatList;
    a.floats = v.toDoubleVector();
  } else if (v.isBoolList()) {
    a.kind = ArgKind::BoolList;
    for (bool b : v.toBoolList()) a.bools.push_back(b);
  } else if (v.isTensorList()) {
    a.kind = ArgKind::TensorList;
    auto list = v.toTensorList();
    for (size_t k = 0; k < list.size(); ++k) a.tensors.push_back(maybe_tensor(list.get(k)));
  } else {
    // Generic lists: Tensor?[] (indices), or Scalar[]-like lists.
    auto list = v.toListRef();
    bool tensors = true, ints = true, numbers = true;
    for (const auto& x : list) {
      tensors &= x.isTensor() || x.isNone();
      ints &= x.isInt();
      numbers &= x.isInt() || x.isDouble();
    }
    if (tensors) {
      a.kind = ArgKind::OptTensorList;
      for (const auto& x : list) a.tensors.push_back(x.isNone() ? std::nullopt : maybe_tensor(x.toTensor()));
    } else if (ints) {
      a.kind = ArgKind::IntList;
      for (const auto& x : list) a.ints.push_back(x.toInt());
    } else if (numbers) {
      a.kind = ArgKind::FloatList;
      for (const auto& x : list) a.floats.push_back(x.toDouble());
    } else {
      a.kind = ArgKind::Other;
      a.text = "list";
    }
  }
}

void describe_value(const c10::IValue& v, const c10::Argument* schema_arg, ArgValue& a) {
  if (v.isNone()) {
    a.kind = ArgKind::None;
  } else if (v.isTensor()) {
    const auto& t = v.toTensor();
    a.kind = t.defined() ? ArgKind::Tensor : ArgKind::None;
    if (t.defined()) a.tensors.push_back(describe_tensor(t));
  } else if (v.isInt()) {
    a.i = v.toInt();
    auto ek = enum_kind(schema_arg);
    a.kind = ek ? *ek : ArgKind::Int;
    if (ek) a.text = enum_name(*ek, a.i), a.i = 0;
  } else if (v.isDouble()) {
    a.kind = ArgKind::Float;
    a.f = v.toDouble();
  } else if (v.isBool()) {
    a.kind = ArgKind::Bool;
    a.b = v.toBool();
  } else if (v.isComplexDouble()) {
    a.kind = ArgKind::Complex;
    auto c = v.toComplexDouble();
    a.c = {c.real(), c.imag()};
  } else if (v.isString()) {
    a.kind = ArgKind::String;
    a.text = v.toStringRef();
  } else if (v.isDevice()) {
    a.kind = ArgKind::Device;
    a.text = names::device(v.toDevice());
  } else if (v.isSymInt() || v.isSymFloat() || v.isSymBool()) {
    a.kind = ArgKind::Symbolic;
  } else if (v.isGenerator()) {
    a.kind = ArgKind::Generator;
  } else if (v.isList()) {
    describe_list(v, a);
  } else {
    a.kind = ArgKind::Other;
    a.text = v.tagKind();
  }
}

}  // namespace

TensorMeta describe_tensor(const at::Tensor& t) {
  TensorMeta m;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  m.dtype = names::dtype(impl->dtype().toScalarType());
  m.device = names::device(impl->device());
  if (impl->is_nested()) {
    m.layout = "nested";
    return m;
  }
  m.layout = names::layout(impl->layout());
  if (impl->has_symbolic_sizes_strides()) {
    m.symbolic = true;
    return m;
  }
  m.shape = impl->sizes().vec();
  if (impl->layout() == c10::kStrided) {
    m.stride = impl->strides().vec();
    m.offset = impl->storage_offset();
  }
  return m;
}

ArgValue describe_arg(const c10::IValue& v, const c10::Argument* schema_arg, size_t index) {
  ArgValue a;
  a.name = schema_arg ? schema_arg->name() : "arg" + std::to_string(index);
  a.type = schema_arg ? schema_arg->real_type()->str() : "";
  a.kwarg_only = schema_arg && schema_arg->kwarg_only();
  try {
    describe_value(v, schema_arg, a);
  } catch (const std::exception& e) {
    ArgValue other;
    other.name = a.name;
    other.type = a.type;
    other.kind = ArgKind::Other;
    a = std::move(other);
    a.text = std::string("unreadable: ") + e.what();
  }
  return a;
}

}  // namespace bb::tracer
