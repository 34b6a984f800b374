#include "tracer/format/trace_model.h"

#include "tracer/format/name_table.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

namespace bb::trace {
namespace {

constexpr std::array<std::pair<ArgKind, const char*>, 19> kKindNames{{
    {ArgKind::None, "none"},
    {ArgKind::Tensor, "tensor"},
    {ArgKind::Int, "int"},
    {ArgKind::Float, "float"},
    {ArgKind::Bool, "bool"},
    {ArgKind::Complex, "complex"},
    {ArgKind::String, "str"},
    {ArgKind::IntList, "int_list"},
    {ArgKind::FloatList, "float_list"},
    {ArgKind::BoolList, "bool_list"},
    {ArgKind::TensorList, "tensor_list"},
    {ArgKind::OptTensorList, "optional_tensor_list"},
    {ArgKind::ScalarType, "dtype"},
    {ArgKind::Layout, "layout"},
    {ArgKind::Device, "device"},
    {ArgKind::MemoryFormat, "memory_format"},
    {ArgKind::Generator, "generator"},
    {ArgKind::Symbolic, "symbolic"},
    {ArgKind::Other, "other"},
}};

// Floats compare bitwise-equal or both NaN: a trace round-trips exactly.
bool same_float(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same_floats(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (!same_float(a[k], b[k])) return false;
  return true;
}

}  // namespace

const char* to_string(ArgKind kind) { return format::name_in(kKindNames, kind, "other"); }

std::optional<ArgKind> arg_kind_from_string(const std::string& text) { return format::value_in(kKindNames, text); }

bool TensorMeta::operator==(const TensorMeta& o) const {
  return dtype == o.dtype && shape == o.shape && stride == o.stride && device == o.device && layout == o.layout &&
         offset == o.offset && symbolic == o.symbolic && range == o.range;
}

bool ArgValue::operator==(const ArgValue& o) const {
  return name == o.name && type == o.type && kind == o.kind && kwarg_only == o.kwarg_only && i == o.i &&
         same_float(f, o.f) && b == o.b && same_float(c.real(), o.c.real()) && same_float(c.imag(), o.c.imag()) &&
         text == o.text && ints == o.ints && same_floats(floats, o.floats) && bools == o.bools && tensors == o.tensors;
}

bool TraceEntry::operator==(const TraceEntry& o) const {
  return op == o.op && count == o.count && nested == o.nested && with_children == o.with_children &&
         routed == o.routed && seen == o.seen && floats_merged == o.floats_merged && args == o.args &&
         device_time == o.device_time && kernels == o.kernels;
}

bool TraceMeta::operator==(const TraceMeta& o) const {
  return tool == o.tool && torch == o.torch && created == o.created && updated == o.updated && status == o.status &&
         pid == o.pid && rank == o.rank && world_size == o.world_size && hostname == o.hostname && argv == o.argv &&
         devices == o.devices && calls == o.calls && untraced_calls == o.untraced_calls && tracing == o.tracing &&
         device_timing == o.device_timing && merged_from == o.merged_from;
}

bool ProcessInfo::operator==(const ProcessInfo& o) const {
  return file == o.file && pid == o.pid && rank == o.rank && hostname == o.hostname && status == o.status &&
         created == o.created && updated == o.updated && argv == o.argv && devices == o.devices && calls == o.calls;
}

bool DeviceTiming::operator==(const DeviceTiming& o) const {
  return status == o.status && calls_timed == o.calls_timed && dropped_records == o.dropped_records &&
         unfinished_records == o.unfinished_records && incomplete_calls == o.incomplete_calls && mode == o.mode &&
         sampled == o.sampled && windows == o.windows && detaches == o.detaches && cut_calls == o.cut_calls &&
         untracked_launches == o.untracked_launches && control_ns == o.control_ns &&
         signatures_short == o.signatures_short && cupti_overhead_ns == o.cupti_overhead_ns &&
         cupti_overhead_records == o.cupti_overhead_records && unattributed == o.unattributed &&
         unattributed_ns == o.unattributed_ns && unattributed_kernels == o.unattributed_kernels && events == o.events;
}

namespace {

void add_bits(std::string& key, double v) {
  if (v != v) v = std::nan("");  // one NaN, whatever its payload
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  key.append(b, sizeof b);
}

template <class T>
void add_list(std::string& key, const std::vector<T>& v) {
  key += "[" + std::to_string(v.size());
  for (const auto& x : v) key += "," + std::to_string(x);
  key += "]";
}

void add_tensor(std::string& key, const std::optional<TensorMeta>& t) {
  if (!t) {
    key += "|null";
    return;
  }
  key += "|" + t->dtype + "|" + t->device + "|" + t->layout + "|" + std::to_string(t->offset) +
         (t->symbolic ? "|sym" : "|");
  add_list(key, t->shape);
  add_list(key, t->stride);
}

}  // namespace

// Everything of a signature that ArgValue::operator== compares, but the observed integer ranges.
std::string signature_key(const TraceEntry& e) {
  std::string key = e.op;
  for (const auto& a : e.args) {
    key += "\n" + a.name + "|" + a.type + "|" + to_string(a.kind) + (a.kwarg_only ? "|kw|" : "|") +
           std::to_string(a.i) + "|" + std::to_string(a.b) + "|" + std::to_string(a.text.size()) + ":" + a.text;
    add_bits(key, a.f);
    add_bits(key, a.c.real());
    add_bits(key, a.c.imag());
    add_list(key, a.ints);
    key += "[";
    for (double x : a.floats) add_bits(key, x);
    key += "]";
    add_list(key, std::vector<int>(a.bools.begin(), a.bools.end()));
    for (const auto& t : a.tensors) add_tensor(key, t);
  }
  return key;
}

bool Trace::operator==(const Trace& o) const { return version == o.version && meta == o.meta && ops == o.ops; }

bool is_dtype_name(const std::string& name) {
  // Every dtype of torch 2.11; tracer/names.cpp writes the same names.
  static constexpr std::array<const char*, 46> kNames{
      "float32",
      "float64",
      "float16",
      "bfloat16",
      "complex32",
      "complex64",
      "complex128",
      "uint8",
      "int8",
      "int16",
      "int32",
      "int64",
      "bool",
      "qint8",
      "quint8",
      "qint32",
      "quint4x2",
      "quint2x4",
      "float8_e5m2",
      "float8_e4m3fn",
      "float8_e5m2fnuz",
      "float8_e4m3fnuz",
      "float8_e8m0fnu",
      "float4_e2m1fn_x2",
      "uint16",
      "uint32",
      "uint64",
      "uint1",
      "uint2",
      "uint3",
      "uint4",
      "uint5",
      "uint6",
      "uint7",
      "int1",
      "int2",
      "int3",
      "int4",
      "int5",
      "int6",
      "int7",
      "bits1x8",
      "bits2x4",
      "bits4x2",
      "bits8",
      "bits16",
  };
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    s[k] = acc;
    acc *= std::max<int64_t>(shape[k], 1);
  }
  return s;
}

const char* unaddressable(const TensorMeta& t) {
  int64_t product = 1;  // of the sizes, 0 counting as 1: contiguous_strides' largest stride and the numel
  bool empty = false;
  for (int64_t s : t.shape) {
    empty |= s == 0;
    if (__builtin_mul_overflow(product, std::max<int64_t>(s, 1), &product))
      return "the product of the sizes does not fit in 64 bits";
  }
  if (empty) return nullptr;  // spans no storage
  int64_t extent = 0;
  for (size_t d = 0; d < t.shape.size() && d < t.stride.size(); ++d) {
    int64_t step = 0;
    if (__builtin_mul_overflow(t.shape[d] - 1, t.stride[d], &step) || __builtin_add_overflow(extent, step, &extent))
      return "the storage it spans (the sum of (size - 1) * stride) does not fit in 64 bits";
  }
  if (__builtin_add_overflow(extent, t.offset, &extent) || __builtin_add_overflow(extent, int64_t{1}, &extent))
    return "its offset plus the storage it spans does not fit in 64 bits";
  return nullptr;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace bb::trace
