#include "tracer/names.h"

#include <array>
#include <utility>

namespace bb::names {
namespace {

using c10::ScalarType;
constexpr std::array<std::pair<ScalarType, const char*>, 46> kDtypes{{
    {ScalarType::Byte, "uint8"},
    {ScalarType::Char, "int8"},
    {ScalarType::Short, "int16"},
    {ScalarType::Int, "int32"},
    {ScalarType::Long, "int64"},
    {ScalarType::Half, "float16"},
    {ScalarType::Float, "float32"},
    {ScalarType::Double, "float64"},
    {ScalarType::ComplexHalf, "complex32"},
    {ScalarType::ComplexFloat, "complex64"},
    {ScalarType::ComplexDouble, "complex128"},
    {ScalarType::Bool, "bool"},
    {ScalarType::QInt8, "qint8"},
    {ScalarType::QUInt8, "quint8"},
    {ScalarType::QInt32, "qint32"},
    {ScalarType::BFloat16, "bfloat16"},
    {ScalarType::QUInt4x2, "quint4x2"},
    {ScalarType::QUInt2x4, "quint2x4"},
    {ScalarType::Float8_e5m2, "float8_e5m2"},
    {ScalarType::Float8_e4m3fn, "float8_e4m3fn"},
    {ScalarType::Float8_e5m2fnuz, "float8_e5m2fnuz"},
    {ScalarType::Float8_e4m3fnuz, "float8_e4m3fnuz"},
    {ScalarType::UInt16, "uint16"},
    {ScalarType::UInt32, "uint32"},
    {ScalarType::UInt64, "uint64"},
    {ScalarType::Float8_e8m0fnu, "float8_e8m0fnu"},
    {ScalarType::Float4_e2m1fn_x2, "float4_e2m1fn_x2"},
    {ScalarType::UInt1, "uint1"},
    {ScalarType::UInt2, "uint2"},
    {ScalarType::UInt3, "uint3"},
    {ScalarType::UInt4, "uint4"},
    {ScalarType::UInt5, "uint5"},
    {ScalarType::UInt6, "uint6"},
    {ScalarType::UInt7, "uint7"},
    {ScalarType::Int1, "int1"},
    {ScalarType::Int2, "int2"},
    {ScalarType::Int3, "int3"},
    {ScalarType::Int4, "int4"},
    {ScalarType::Int5, "int5"},
    {ScalarType::Int6, "int6"},
    {ScalarType::Int7, "int7"},
    {ScalarType::Bits1x8, "bits1x8"},
    {ScalarType::Bits2x4, "bits2x4"},
    {ScalarType::Bits4x2, "bits4x2"},
    {ScalarType::Bits8, "bits8"},
    {ScalarType::Bits16, "bits16"},
}};

using c10::Layout;
constexpr std::array<std::pair<Layout, const char*>, 8> kLayouts{{
    {Layout::Strided, "strided"},
    {Layout::Sparse, "sparse_coo"},
    {Layout::SparseCsr, "sparse_csr"},
    {Layout::Mkldnn, "_mkldnn"},
    {Layout::SparseCsc, "sparse_csc"},
    {Layout::SparseBsr, "sparse_bsr"},
    {Layout::SparseBsc, "sparse_bsc"},
    {Layout::Jagged, "jagged"},
}};

using c10::MemoryFormat;
constexpr std::array<std::pair<MemoryFormat, const char*>, 4> kFormats{{
    {MemoryFormat::Contiguous, "contiguous_format"},
    {MemoryFormat::Preserve, "preserve_format"},
    {MemoryFormat::ChannelsLast, "channels_last"},
    {MemoryFormat::ChannelsLast3d, "channels_last_3d"},
}};

template <class Table, class E>
std::string name_of(const Table& table, E value, const char* kind) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return std::string(kind) + std::to_string(static_cast<int>(value));
}

template <class Table>
auto value_of(const Table& table, const std::string& name)
    -> std::optional<typename Table::value_type::first_type> {
  for (const auto& [v, n] : table)
    if (name == n) return v;
  return std::nullopt;
}

}  // namespace

std::string dtype(c10::ScalarType t) { return name_of(kDtypes, t, "dtype"); }
std::string layout(c10::Layout l) { return name_of(kLayouts, l, "layout"); }
std::string memory_format(c10::MemoryFormat m) { return name_of(kFormats, m, "memory_format"); }
std::string device(c10::Device d) { return d.str(); }

std::optional<c10::ScalarType> dtype_from(const std::string& name) { return value_of(kDtypes, name); }
std::optional<c10::Layout> layout_from(const std::string& name) { return value_of(kLayouts, name); }
std::optional<c10::MemoryFormat> memory_format_from(const std::string& name) {
  return value_of(kFormats, name);
}

bool is_integral_dtype(const std::string& name) {
  auto t = dtype_from(name);
  return t && c10::isIntegralType(*t, /*includeBool=*/true);
}

}  // namespace bb::names
