#include "replay/case/inputs.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "backends/op_names.h"
#include "replay/case/derived_args.h"
#include "replay/case/index_ranges.h"
#include "replay/judgeable/judgeable.h"
#include "replay/random/random_judge.h"
#include "replay/case/spent.h"
#include "tracer/format/op_name.h"
#include "tracer/names.h"

namespace bb::replay {
namespace {

using trace::ArgKind;
using trace::ArgValue;
using trace::TensorMeta;
using Range = std::pair<int64_t, int64_t>;  // inclusive

const trace::ArgValue* find_arg(const std::vector<trace::ArgValue>& args, const std::string& name) {
  for (const auto& a : args)
    if (a.name == name) return &a;
  return nullptr;
}

// ------------------------------------------------------------------ values

bool positive_only(const std::string& arg) {
  static const std::set<std::string> names = {"running_var", "var", "rstd", "invstd", "save_invstd"};
  return names.count(arg) > 0;
}

// The elements of storage a tensor of this metadata needs: its offset, plus its span unless it is empty.
int64_t storage_extent(const TensorMeta& m) {
  int64_t extent = m.offset + 1;
  for (size_t d = 0; d < m.shape.size() && d < m.stride.size(); ++d) {
    if (m.shape[d] == 0) return m.offset;
    extent += (m.shape[d] - 1) * m.stride[d];
  }
  return extent;
}

// Ops that address their input's storage through explicit `size` and `stride` arguments (views such as
// _reshape_alias and as_strided, set_ with an offset, as_strided_scatter): the storage of elements
// the call reaches, or nullopt for other ops. Meta kernels check none of this.
std::optional<int64_t> addressed_extent(const BoundCall& call) {
  const auto& s = call.op.schema();
  const bool aliases_input = !s.returns().empty() && s.returns()[0].alias_info();
  if (!aliases_input && s.name().find("as_strided") == std::string::npos) return std::nullopt;
  const ArgValue *size = nullptr, *stride = nullptr, *offset = nullptr;
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (!call.args[i]) continue;
    const std::string& name = s.arguments()[i].name();
    if (name == "size") size = &*call.args[i];
    if (name == "stride") stride = &*call.args[i];
    if (name == "storage_offset") offset = &*call.args[i];
  }
  if (!size || !stride || size->kind != ArgKind::IntList || stride->kind != ArgKind::IntList) return std::nullopt;
  TensorMeta reached;
  reached.shape = size->ints;
  reached.stride = stride->ints;
  if (offset && offset->kind == ArgKind::Int) reached.offset = offset->i;
  else if (call.args[0] && call.args[0]->kind == ArgKind::Tensor && call.args[0]->tensors[0])
    reached.offset = call.args[0]->tensors[0]->offset;  // a view without an offset starts at its input's
  return storage_extent(reached);
}

// The large-values variant's factor on every floating-point input (a power of two, so scaling rounds
// nothing): |x| reaches a few hundred (float16: twenty), where a formula that
// overflows in its intermediates (tanh as expm1(2x) / (expm1(2x) + 2), softmax without subtracting the
// maximum, log(1 + exp(x))) gives inf or NaN although the op's result is finite. Products and long
// sums of such values stay far inside the type's range (float16's products and sums of 16,384 of
// them too), so native's own results stay finite wherever the op's are.
double large_values_scale(c10::ScalarType t) { return t == at::kHalf ? 4.0 : 64.0; }

class Maker {
 public:
  Maker(const BoundCall& call, const InputOptions& o) : call_(call), lookup_{call}, o_(o) {}

  c10::IValue value(size_t i) {
    const c10::Argument& param = call_.op.schema().arguments()[i];
    if (!call_.args[i]) return param.default_value().value_or(c10::IValue());
    const ArgValue& a = *call_.args[i];
    const bool tensor_param = param.real_type()->kind() == c10::TypeKind::TensorType;
    const bool number = a.kind == ArgKind::Int || a.kind == ArgKind::Float || a.kind == ArgKind::Bool;
    if (tensor_param && number) return wrapped_number(a);  // TorchBench logs: mul.Tensor(T, 0.5)
    if (a.kind == ArgKind::TensorList && param.real_type()->str() == "Tensor?[]") {  // TorchBench: index(T, [T])
      c10::List<std::optional<at::Tensor>> l;
      for (size_t k = 0; k < a.tensors.size(); ++k) l.push_back(tensor(*a.tensors[k], param.name(), k, i));
      return l;
    }
    switch (a.kind) {
      // An undefined tensor where the schema says Tensor, not Tensor? (_cudnn_attention_backward's
      // attn_bias and cum_seq_q/k): the op takes an undefined tensor there, never None.
      case ArgKind::None: return tensor_param ? c10::IValue(at::Tensor()) : c10::IValue();
      case ArgKind::Tensor: return tensor(*a.tensors[0], param.name(), 0, i);
      case ArgKind::Int: return a.i;
      case ArgKind::Float: return a.f;
      case ArgKind::Bool: return a.b;
      case ArgKind::Complex: return c10::complex<double>(a.c.real(), a.c.imag());
      case ArgKind::String: return a.text;
      case ArgKind::IntList: return a.ints;
      case ArgKind::FloatList: {
        if (param.real_type()->str() != "Scalar[]") return a.floats;
        c10::List<at::Scalar> l;  // _foreach_*.ScalarList
        for (double f : a.floats) l.push_back(f);
        return l;
      }
      case ArgKind::BoolList: {
        c10::List<bool> l;
        for (bool b : a.bools) l.push_back(b);
        return l;
      }
      case ArgKind::TensorList: {
        std::vector<at::Tensor> v;
        for (size_t k = 0; k < a.tensors.size(); ++k) v.push_back(tensor(*a.tensors[k], param.name(), k, i));
        return v;
      }
      case ArgKind::OptTensorList: {
        c10::List<std::optional<at::Tensor>> l;
        for (size_t k = 0; k < a.tensors.size(); ++k)
          l.push_back(a.tensors[k] ? std::optional<at::Tensor>(tensor(*a.tensors[k], param.name(), k, i))
                                   : std::nullopt);
        return l;
      }
      case ArgKind::ScalarType: return static_cast<int64_t>(enum_value(names::dtype_from(a.text), a));
      case ArgKind::Layout: return static_cast<int64_t>(enum_value(names::layout_from(a.text), a));
      case ArgKind::MemoryFormat: return static_cast<int64_t>(enum_value(names::memory_format_from(a.text), a));
      case ArgKind::Device: return o_.device;  // every device in the call becomes the replay device
      default: throw std::invalid_argument("argument " + a.name + " (" + to_string(a.kind) + ") cannot be rebuilt");
    }
  }

 private:
  // A Python number passed where the schema wants a tensor: a 0-dim "wrapped number" tensor, which
  // type promotion treats as Python does (it does not make float32 * 0.5 a float64).
  c10::IValue wrapped_number(const ArgValue& a) const {
    at::Tensor t = a.kind == ArgKind::Float  ? at::scalar_tensor(a.f, at::kDouble)
                   : a.kind == ArgKind::Bool ? at::scalar_tensor(a.b, at::kBool)
                                             : at::scalar_tensor(a.i, at::kLong);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;  // on the CPU, as Python makes them: CPU scalars mix with tensors of any device
  }

  template <class E>
  E enum_value(std::optional<E> v, const ArgValue& a) const {
    if (!v) throw std::invalid_argument("argument " + a.name + ": unknown name '" + a.text + "'");
    return *v;
  }

  // A generator per tensor: the values do not depend on which other tensors are made.
  uint64_t seed_of(size_t arg, size_t elem) const {
    uint64_t h = o_.seed * 0x9E3779B97F4A7C15ull + arg * 0x100000001B3ull + elem * 0xBF58476D1CE4E5B9ull;
    return h ^ (std::hash<std::string>()(o_.variant) + std::hash<std::string>()(call_.op.schema().name()));
  }

  at::Generator generator(size_t arg, size_t elem) const {
    const uint64_t h = seed_of(arg, elem);
    if (drawn_on_device()) {
      at::Generator g = at::globalContext().defaultGenerator(o_.device).clone();
      g.set_current_seed(h);
      return g;
    }
    return at::detail::createCPUGenerator(h);
  }

  bool drawn_on_device() const { return o_.on_device && !o_.device.is_cpu() && !o_.device.is_meta(); }

  at::Tensor fill(int64_t numel, c10::ScalarType t, const std::optional<Range>& range, const std::string& name,
                  at::Generator gen) const {
    auto where = at::TensorOptions().device(drawn_on_device() ? o_.device : c10::Device(c10::kCPU));
    if (t == at::kBool) return at::randint(0, 2, {numel}, gen, where.dtype(at::kLong)).to(at::kBool);
    if (c10::isIntegralType(t, false)) {
      const bool is_unsigned = t == at::kByte || t == at::kUInt16 || t == at::kUInt32 || t == at::kUInt64;
      Range r = range.value_or(is_unsigned ? Range{0, 15} : Range{-8, 8});
      return at::randint(r.first, r.second + 1, {numel}, gen, where.dtype(at::kLong)).to(t);
    }
    // Not centred on zero, not confined to [0, 1): identity kernels fail relu and abs. Drawn in float32
    // for float32 and narrower types (3.5x faster than in float64 on the CPU), float64 otherwise.
    const bool wide = t == at::kDouble || c10::isComplexType(t);
    at::Tensor x = at::normal(0.25, 1.0, {numel}, gen, where.dtype(wide ? at::kDouble : at::kFloat));
    if (positive_only(name)) x = x.abs() + 0.1;
    if (o_.variant == "large-values") x.mul_(large_values_scale(t));
    return x.to(t);
  }

  at::Tensor tensor(const TensorMeta& m, const std::string& name, size_t elem, size_t arg) const {
    auto t = names::dtype_from(m.dtype);
    if (!t) throw std::invalid_argument("tensor " + name + ": unknown dtype " + m.dtype);
    if (m.symbolic || m.layout != "strided") throw std::invalid_argument("tensor " + name + " is " + m.layout);
    // The observed range, within what the op accepts: a target traced with ignore_index (-100) among
    // its classes must not be drawn from [-100, C).
    std::optional<Range> range = semantic_range(call_.op.schema().name(), name, elem, lookup_);
    if (m.range) {
      const Range seen{m.range->first, m.range->second};
      if (!range) range = seen;
      else if (std::max(seen.first, range->first) <= std::min(seen.second, range->second))
        range = Range{std::max(seen.first, range->first), std::min(seen.second, range->second)};
    }
    int64_t storage = storage_extent(m);
    // as_strided and its kin address their input's storage directly, beyond the input's own elements;
    // the trace records the input's extent, not its storage's, so the storage is made large enough.
    if (arg == 0 && call_.op.schema().name().rfind("aten::as_strided", 0) == 0)
      storage = std::max(storage, addressed_extent(call_).value_or(0));
    at::Tensor base = o_.device.is_meta() ? at::empty({storage}, at::TensorOptions().dtype(*t).device(c10::kMeta))
                                          : fill(storage, *t, range, name, generator(arg, elem)).to(o_.device);
    // Not a view of `base` (in-place ops such as detach_ refuse views), with the traced strides on
    // every device (.to() would make a strided tensor contiguous).
    at::Tensor out = at::empty({0}, base.options());
    out.set_(base.storage(), m.offset, m.shape, m.stride);
    // A value the op gives a meaning of its own outside that range (a loss's ignore_index): where the
    // program passed it (its traced range holds it) and in the special-values variant, about one element
    // in 8 and the first are given it. Drawn from the range alone, a kernel that writes an ignored row's
    // gradient at index ignore_index (FlagGems 5.0.2's nll_loss_backward: into the row before) passed.
    if (const auto ignored = ignored_value(call_.op.schema().name(), name, lookup_);
        ignored && !o_.device.is_meta() && out.numel() > 0 &&
        (o_.variant == "special-values" || (m.range && m.range->first <= *ignored && *ignored <= m.range->second))) {
      at::Tensor mask = at::randint(0, 8, m.shape, at::detail::createCPUGenerator(seed_of(arg, elem) ^ 0x1D),
                                    at::TensorOptions().dtype(at::kLong)) == 0;
      mask.view({-1})[0] = true;
      out.masked_fill_(mask.to(out.device()), *ignored);
    }
    return out;
  }

  const BoundCall& call_;
  Lookup lookup_;
  const InputOptions& o_;
};

// The tensor metadata of every tensor in the call, for variants to rewrite.
std::vector<TensorMeta*> tensors_of(BoundCall& call) {
  std::vector<TensorMeta*> out;
  for (auto& a : call.args)
    if (a)
      for (auto& t : a->tensors)
        if (t) out.push_back(&*t);
  return out;
}

// Variants that change shapes apply to calls whose tensors are single arguments of one shape.
bool one_shape(BoundCall& call) {
  auto ts = tensors_of(call);
  if (ts.empty() || ts[0]->shape.empty()) return false;
  for (const auto& a : call.args)
    if (a && (a->kind == ArgKind::TensorList || a->kind == ArgKind::OptTensorList)) return false;
  for (auto* t : ts)
    if (t->shape != ts[0]->shape) return false;
  return true;
}

void reshape_all(BoundCall& call, const std::vector<int64_t>& shape) {
  for (auto* t : tensors_of(call)) {
    t->shape = shape;
    t->stride = trace::contiguous_strides(shape);
    t->offset = 0;
    t->range.reset();  // recorded ranges belong to the traced shapes
  }
}

// Rewrites the call's tensors for a variant; throws when it does not apply.
void apply_variant(BoundCall& call, const std::string& variant) {
  auto fail = [&] { throw std::invalid_argument("variant " + variant + " does not apply to this call"); };
  if (variant == "traced" || variant == "special-values" || variant == "large-values") return;
  if (variant == "noncontiguous") {
    bool changed = false;
    std::vector<TensorMeta*> inputs;  // derived arguments keep the layout their forward op gives them
    const auto& params = call.op.schema().arguments();
    for (size_t i = 0; i < call.args.size(); ++i)
      if (call.args[i] && !is_derived(call.op.schema(), params[i].name()))
        for (auto& t : call.args[i]->tensors)
          if (t) inputs.push_back(&*t);
    for (auto* t : inputs) {
      int64_t numel = 1;
      for (int64_t s : t->shape) numel *= s;
      if (numel <= 1 || t->stride != trace::contiguous_strides(t->shape)) continue;
      std::vector<int64_t> padded = t->shape;
      padded.back() *= 2;  // every other element of a buffer twice as wide
      t->stride = trace::contiguous_strides(padded);
      t->stride.back() = 2;
      changed = true;
    }
    if (!changed) fail();
    return;
  }
  if (!one_shape(call)) fail();
  std::vector<int64_t> shape = tensors_of(call)[0]->shape;
  if (variant == "empty") {
    shape[0] = 0;
  } else if (variant == "scalar") {
    shape.clear();
  } else if (variant == "odd-size") {
    static const int64_t primes[] = {7, 13, 31, 5, 3, 2};
    for (size_t d = 0; d < shape.size(); ++d) shape[d] = primes[std::min<size_t>(d, 5)];
  } else {
    throw std::invalid_argument("unknown variant " + variant);
  }
  reshape_all(call, shape);
}

// NaN, +inf and -inf at three places of every floating-point input's memory (written into the
// storage, so that inputs whose elements share memory, such as expanded ones, work too).
void inject_special_values(std::vector<c10::IValue>& values) {
  for (auto& v : values) {
    if (!v.isTensor() || !v.toTensor().defined() || !v.toTensor().is_floating_point()) continue;
    const at::Tensor& t = v.toTensor();
    const int64_t n = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
    if (t.numel() == 0 || n == 0) continue;
    at::Tensor storage = t.as_strided({n}, {1}, 0);
    const double specials[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3 && k < n; ++k) storage[(k * n) / 3].fill_(specials[k]);
  }
}

}  // namespace

BoundCall bind_call(const trace::TraceEntry& entry) {
  auto [name, overload] = trace::split_op(entry.op);
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  if (std::string why = bookkeeping(entry.op); !why.empty()) throw std::invalid_argument(why);
  if (!handle && name.rfind("aten::", 0) != 0) throw std::invalid_argument(foreign_library(entry.op));
  if (!handle) throw std::invalid_argument("unknown op " + entry.op + " (not in this torch)");
  BoundCall call{*handle, {}};
  const auto& params = handle->schema().arguments();
  std::set<std::string> used;
  for (size_t i = 0; i < params.size(); ++i) {
    const ArgValue* a = find_arg(entry.args, params[i].name());
    if (!a) a = find_arg(entry.args, "arg" + std::to_string(i));
    if (a) used.insert(a->name);
    if (!a && !params[i].default_value() && params[i].real_type()->kind() != c10::TypeKind::OptionalType)
      throw std::invalid_argument("argument " + params[i].name() + " of " + entry.op + " is missing");
    call.args.push_back(a ? std::optional<ArgValue>(*a) : std::nullopt);
  }
  for (const auto& a : entry.args)
    if (!used.count(a.name)) throw std::invalid_argument("argument " + a.name + " is not in " + entry.op + "'s schema");
  return call;
}

// Whether a call of an op tagged random is deterministic with its traced arguments (judgeable.h).
bool deterministic_here(const BoundCall& call) {
  const auto& params = call.op.schema().arguments();
  std::vector<std::pair<std::string, const ArgValue*>> named;
  for (size_t i = 0; i < params.size() && i < call.args.size(); ++i)
    named.emplace_back(params[i].name(), call.args[i] ? &*call.args[i] : nullptr);
  return deterministic_by_arguments(named);
}

std::string unreplayable(const BoundCall& call) {
  if (call.op.hasTag(at::Tag::nondeterministic_seeded) && !deterministic_here(call))
    return std::string(kRandomOp) + " (its results depend on the generator's state, not only on its inputs)";
  for (const auto& p : call.op.schema().arguments())
    if (p.real_type()->str().find("Generator") != std::string::npos)
      return std::string(kRandomOp) + " (takes a generator)";
  return unrebuildable(call);
}

std::string unrebuildable(const BoundCall& call) {
  for (const auto& a : call.args)
    if (a)
      if (std::string why = unrebuildable_argument(*a); !why.empty()) return why;
  return "";
}

bool variant_applies(const BoundCall& bound, const std::string& variant) {
  if (!unreplayable(bound).empty()) return false;  // one skipped row (the traced one) says why
  BoundCall call = bound;
  try {
    apply_variant(call, variant);
  } catch (const std::invalid_argument&) {
    return false;
  }
  // A variant that changed the input's storage must still hold every element the op's explicit sizes
  // and strides reach (they were traced for the original input): decided from the extents, since
  // native on meta tensors checks no bounds. (as_strided's input storage is made large enough.)
  if (auto reached = addressed_extent(call); reached && call.op.schema().name().rfind("aten::as_strided", 0) != 0) {
    const ArgValue* self = call.args.empty() || !call.args[0] ? nullptr : &*call.args[0];
    if (!self || self->kind != ArgKind::Tensor || !self->tensors[0] || storage_extent(*self->tensors[0]) < *reached)
      return false;
  }
  if (variant == "special-values" || variant == "large-values") {
    for (auto* t : tensors_of(call))  // NaN, Inf and large values need a floating-point input to go into
      if (auto type = names::dtype_from(t->dtype); type && c10::isFloatingType(*type)) return true;
    return false;
  }
  // A variant must still be a valid call (the op's other arguments, such as dims and target sizes,
  // were traced for the original shapes; some kernels want contiguous inputs): asked of native on
  // meta tensors, which hold no data. Ops without a meta kernel are given the benefit of the doubt.
  try {
    auto values = make_inputs(bound, {c10::Device(c10::kMeta), 0, variant});
    torch::jit::Stack stack(values.begin(), values.end());
    bound.op.callBoxed(&stack);
  } catch (const c10::NotImplementedError&) {
    return true;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

void add_storage_bytes(const c10::IValue& v, std::set<const void*>& seen, uint64_t& bytes) {
  auto add = [&](const at::Tensor& t) {
    if (!t.defined() || !t.has_storage() || !seen.insert(t.storage().unsafeGetStorageImpl()).second) return;
    if (__builtin_add_overflow(bytes, static_cast<uint64_t>(t.storage().nbytes()), &bytes)) bytes = UINT64_MAX;
  };
  if (v.isTensor()) add(v.toTensor());
  else if (v.isTensorList())
    for (const auto& t : v.toTensorVector()) add(t);
  else if (v.isList())
    for (const auto& x : v.toListRef()) add_storage_bytes(x, seen, bytes);
  else if (v.isTuple())
    for (const auto& x : v.toTupleRef().elements()) add_storage_bytes(x, seen, bytes);
}

std::optional<uint64_t> case_bytes(const BoundCall& call, const std::string& variant) {
  std::vector<c10::IValue> values;
  try {
    values = make_inputs(call, {c10::Device(c10::kMeta), 0, variant});
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::set<const void*> seen;
  uint64_t inputs = 0, largest = 0;
  for (const auto& v : values) {
    uint64_t one = 0;
    add_storage_bytes(v, seen, one);
    largest = std::max(largest, one);
    if (__builtin_add_overflow(inputs, one, &inputs)) inputs = UINT64_MAX;
  }
  uint64_t results = 0;
  try {  // an op such as empty or expand makes large results from small inputs
    torch::jit::Stack stack(values.begin(), values.end());
    call.op.callBoxed(&stack);
    for (const auto& v : stack) add_storage_bytes(v, seen, results);
  } catch (const std::exception&) {
    // No meta kernel (many ops have theirs only in Python: relu here) or native rejects the call: as
    // large as the largest input, as elementwise ops and most others make theirs.
    results = largest;
  }
  uint64_t bytes = 0;
  return __builtin_add_overflow(inputs, results, &bytes) ? UINT64_MAX : bytes;
}

std::vector<c10::IValue> make_inputs(const BoundCall& bound, const InputOptions& options) {
  Spent spent(phase::kInputs);
  BoundCall call = bound;
  apply_variant(call, options.variant);
  Maker maker(call, options);
  std::vector<c10::IValue> values;
  for (size_t i = 0; i < call.args.size(); ++i) values.push_back(maker.value(i));
  if (options.variant == "special-values") inject_special_values(values);
  prepare_random_inputs(call, values, options.seed);  // probabilities in [0, 1) where an op takes them
  derive_arguments(call, values);  // pooling indices, saved statistics: from the forward op on these inputs
  return values;
}

}  // namespace bb::replay
