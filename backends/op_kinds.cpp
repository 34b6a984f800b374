#include "backends/op_kinds.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "backends/op_names.h"
#include "tracer/format/op_name.h"

namespace bb::backends {
namespace {

// By name without overload: allocation, copies, fills, scalar reads, dtype/device moves.
const std::set<std::string>& allowed_names() {
  static const std::set<std::string> names = {
      "aten::empty",
      "aten::empty_like",
      "aten::empty_strided",
      "aten::new_empty",
      "aten::new_empty_strided",
      "aten::zeros",
      "aten::zeros_like",
      "aten::new_zeros",
      "aten::ones",
      "aten::ones_like",
      "aten::new_ones",
      "aten::full",
      "aten::full_like",
      "aten::new_full",
      "aten::scalar_tensor",
      "aten::arange",
      "aten::fill_",
      "aten::zero_",
      "aten::clone",
      "aten::copy_",
      "aten::contiguous",
      "aten::_to_copy",
      "aten::to",
      "aten::resize_",
      "aten::item",
      "aten::_local_scalar_dense",
      "aten::lift_fresh",
      "aten::resolve_conj",
      "aten::resolve_neg",
      "aten::_copy_from",
      "aten::_copy_from_and_resize",
      "aten::set_",
  };
  return names;
}

// A view: the first return aliases an input without writing it (view, expand, permute, t, ...).
bool is_view(const c10::FunctionSchema& s) {
  if (s.returns().empty()) return false;
  const auto* alias = s.returns()[0].alias_info();
  return alias && !alias->isWrite();
}

// Plumbing ops that do one kind of work: a kernel for one of them must not hand that work to another.
const std::vector<std::set<std::string>>& kin() {
  static const std::vector<std::set<std::string>> groups = {
      {"aten::clone", "aten::copy_", "aten::contiguous", "aten::_to_copy", "aten::to", "aten::_copy_from",
       "aten::_copy_from_and_resize", "aten::lift_fresh"},
      {"aten::fill_", "aten::zero_", "aten::zeros", "aten::zeros_like", "aten::new_zeros", "aten::ones",
       "aten::ones_like", "aten::new_ones", "aten::full", "aten::full_like", "aten::new_full", "aten::scalar_tensor"},
  };
  return groups;
}

bool same_work(const std::string& a, const std::string& b) {
  if (a == b) return true;
  for (const auto& g : kin())
    if (g.count(a) && g.count(b)) return true;
  return false;
}

bool holds_tensors(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& inner : t->containedTypes())
    if (holds_tensors(inner)) return true;
  return false;
}

// No tensor in or out (promote_types, can_cast, result_type of two scalars): a function of scalars,
// with no memory to do work on; FlagGems' cat asks torch.promote_types for its result's dtype.
bool tensor_free(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments())
    if (holds_tensors(a.type())) return false;
  for (const auto& r : s.returns())
    if (holds_tensors(r.type())) return false;
  return true;
}

// A view, an in-place change of a tensor's metadata alone (ATen's inplace_view tag: detach_, squeeze_,
// t_, as_strided_, ...: Liger's layer norm calls detach_, 2026-12-07), or a function of scalars.
bool classify(const std::string& op) {
  auto [name, overload] = trace::split_op(op);
  if (name.rfind("aten::", 0) != 0 || allowed_names().count(name)) return true;
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  return !handle || is_view(handle->schema()) || handle->hasTag(at::Tag::inplace_view) || tensor_free(handle->schema());
}

}  // namespace

bool is_plumbing_op(const std::string& op) {
  static std::mutex mu;
  static auto* known = new std::unordered_map<std::string, bool>();  // never freed: used at exit
  std::lock_guard<std::mutex> lock(mu);
  auto it = known->find(op);
  if (it == known->end()) it = known->emplace(op, classify(op)).first;
  return it->second;
}

bool is_plumbing_for(const std::string& kernel_op, const std::string& op) {
  return is_plumbing_op(op) && !same_work(trace::base_name(kernel_op), trace::base_name(op));
}

bool does_work_of(const std::string& kernel_op, const std::string& op) {
  return trace::base_name(op) == trace::base_name(kernel_op) || (is_plumbing_op(op) && !is_plumbing_for(kernel_op, op));
}

bool is_allowed_for(const std::string& kernel_op, const std::string& op, const AtenAllowance& allow) {
  // (plumbing ops are never compute ops to allow: those of its kin do its work, the others are allowed anyway)
  if (allow.empty() || is_plumbing_op(op) || does_work_of(kernel_op, op)) return false;
  if (allow.all) return true;
  const std::string name = trace::split_op(op).first;
  for (const auto& a : allow.ops)
    if (a == op || a == name) return true;
  return false;
}

}  // namespace bb::backends
