#include "tracer/format/torchbench_tokens.h"

#include <array>

namespace bb::trace::torchbench {
namespace {

constexpr std::array<std::pair<const char*, const char*>, 13> kAbbrs{{
    {"bf16", "bfloat16"},
    {"f64", "float64"},
    {"f32", "float32"},
    {"f16", "float16"},
    {"c32", "complex32"},
    {"c64", "complex64"},
    {"c128", "complex128"},
    {"i8", "int8"},
    {"i16", "int16"},
    {"i32", "int32"},
    {"i64", "int64"},
    {"b8", "bool"},
    {"u8", "uint8"},
}};

}  // namespace

const std::map<std::string, std::pair<ArgKind, std::string>>& torch_names() {
  static const std::map<std::string, std::pair<ArgKind, std::string>> names = {
      {"torch.strided", {ArgKind::Layout, "strided"}},
      {"torch.sparse_coo", {ArgKind::Layout, "sparse_coo"}},
      {"torch.sparse_csr", {ArgKind::Layout, "sparse_csr"}},
      {"torch.contiguous_format", {ArgKind::MemoryFormat, "contiguous_format"}},
      {"torch.preserve_format", {ArgKind::MemoryFormat, "preserve_format"}},
      {"torch.channels_last", {ArgKind::MemoryFormat, "channels_last"}},
      {"torch.channels_last_3d", {ArgKind::MemoryFormat, "channels_last_3d"}},
  };
  return names;
}

std::string dtype_from_token(const std::string& tok) {
  for (const auto& [abbr, name] : kAbbrs)
    if (tok == abbr) return name;
  if (tok.rfind("torch.", 0) == 0 && is_dtype_name(tok.substr(6))) return tok.substr(6);
  return "";
}

std::string abbr_of(const std::string& dtype) {
  for (const auto& [abbr, name] : kAbbrs)
    if (dtype == name) return abbr;
  return "torch." + dtype;
}

}  // namespace bb::trace::torchbench
