#include "tracer/names.h"

#include <array>
#include <stdexcept>
#include <utility>

#include "tracer/format/name_table.h"

namespace bb::names {
namespace {

using c10::ScalarType;
constexpr int kDtypeCount = static_cast<int>(ScalarType::NumOptions);

// torch's own Python names ("float32" for Float: c10::getDtypeNames), made once; "" for a type it has
// none for.
const std::array<std::string, kDtypeCount>& dtype_names() {
  static const auto names = [] {
    std::array<std::string, kDtypeCount> out;
    for (int i = 0; i < kDtypeCount; ++i) {
      try {
        out[i] = c10::getDtypeNames(static_cast<ScalarType>(i)).first;
      } catch (const std::exception&) {  // (left unnamed)
      }
    }
    return out;
  }();
  return names;
}

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
  if (const char* name = format::name_in(table, value, nullptr)) return name;
  return std::string(kind) + std::to_string(static_cast<int>(value));
}

}  // namespace

std::string dtype(c10::ScalarType t) {
  const int i = static_cast<int>(t);
  if (i >= 0 && i < kDtypeCount && !dtype_names()[i].empty()) return dtype_names()[i];
  return "dtype" + std::to_string(i);
}
std::string layout(c10::Layout l) { return name_of(kLayouts, l, "layout"); }
std::string memory_format(c10::MemoryFormat m) { return name_of(kFormats, m, "memory_format"); }
std::string device(c10::Device d) { return d.str(); }

std::optional<c10::ScalarType> dtype_from(const std::string& name) {
  for (int i = 0; i < kDtypeCount; ++i)
    if (!name.empty() && dtype_names()[i] == name) return static_cast<c10::ScalarType>(i);
  return std::nullopt;
}
std::optional<c10::Layout> layout_from(const std::string& name) { return format::value_in(kLayouts, name); }
std::optional<c10::MemoryFormat> memory_format_from(const std::string& name) {
  return format::value_in(kFormats, name);
}

}  // namespace bb::names
