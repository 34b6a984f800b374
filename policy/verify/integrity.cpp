#include "policy/verify/integrity.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "policy/verify/compare.h"

namespace bb::verify {
namespace {

// Byte ranges of a tensor's storage.
std::pair<uintptr_t, uintptr_t> span(const at::Tensor& t) {
  if (!t.has_storage() || !t.storage().data()) return {0, 0};
  const auto begin = reinterpret_cast<uintptr_t>(t.storage().data());
  return {begin, begin + t.storage().nbytes()};
}

// Every alias set an argument or return names before the call, its list elements' included.
void before_sets(const c10::AliasInfo* info, std::vector<c10::Symbol>& out, bool& wildcard) {
  if (!info) return;
  wildcard |= info->isWildcardBefore();
  for (const auto& s : info->beforeSets()) out.push_back(s);
  for (const auto& c : info->containedTypes()) before_sets(&c, out, wildcard);
}

// Whether the schema lets two of its arguments/returns share memory: they name a common alias set.
bool declared(const c10::Argument& a, const c10::Argument& b) {
  std::vector<c10::Symbol> sa, sb;
  bool wa = false, wb = false;
  before_sets(a.alias_info(), sa, wa);
  before_sets(b.alias_info(), sb, wb);
  if ((wa && !sb.empty()) || (wb && !sa.empty()) || (wa && wb)) return true;
  for (const auto& s : sa)
    if (std::find(sb.begin(), sb.end(), s) != sb.end()) return true;
  return false;
}

}  // namespace

std::vector<at::Tensor> tensors_of(const Values& values, size_t limit) {
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < values.size() && k < limit; ++k) {
    const auto& v = values[k];
    if (v.isTensor() && v.toTensor().defined()) out.push_back(v.toTensor());
    if (v.isList())
      for (const auto& e : v.toListRef())
        if (e.isTensor() && e.toTensor().defined()) out.push_back(e.toTensor());
  }
  return out;
}

bool overlap(const at::Tensor& a, const at::Tensor& b) {
  auto [a0, a1] = span(a);
  auto [b0, b1] = span(b);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

std::vector<std::string> aliasing(const c10::FunctionSchema& schema, const Values& args, const Values& results,
                                  size_t outputs) {
  std::vector<std::string> found;
  const auto& params = schema.arguments();
  for (size_t k = 0; k < outputs && k < results.size(); ++k) {
    for (const at::Tensor& out : tensors_of({results[k]})) {
      for (size_t i = 0; i < args.size() && i < params.size(); ++i)
        for (const at::Tensor& in : tensors_of({args[i]}))
          if (overlap(out, in))
            found.push_back("result " + std::to_string(k) + " shares memory with argument '" + params[i].name() + "'");
      for (size_t j = 0; j < k; ++j)
        for (const at::Tensor& other : tensors_of({results[j]}))
          if (overlap(out, other))
            found.push_back("result " + std::to_string(k) + " shares memory with result " + std::to_string(j));
    }
  }
  return found;
}

std::string aliasing_native_lacks(const c10::FunctionSchema& schema, const Values& native_args,
                                  const Values& native_results, const Values& args, const Values& results,
                                  size_t outputs) {
  const auto theirs = aliasing(schema, native_args, native_results, outputs);
  for (const auto& a : aliasing(schema, args, results, outputs))
    if (std::find(theirs.begin(), theirs.end(), a) == theirs.end()) return a;
  return "";
}

std::string undeclared_aliasing(const c10::FunctionSchema& schema, const Values& args, const Values& results) {
  // Runs after every routed call: each value's tensors gathered once; the schema is read only for an overlap.
  const auto& params = schema.arguments();
  const auto& returns = schema.returns();
  std::vector<std::pair<size_t, at::Tensor>> ins, outs;
  for (size_t i = 0; i < args.size() && i < params.size(); ++i)
    for (const at::Tensor& t : tensors_of({args[i]})) ins.emplace_back(i, t);
  for (size_t k = 0; k < results.size() && k < returns.size(); ++k) {
    for (const at::Tensor& out : tensors_of({results[k]})) {
      for (const auto& [i, in] : ins)
        if (overlap(out, in) && !declared(returns[k], params[i]))
          return "result " + std::to_string(k) + " shares memory with argument '" + params[i].name() +
                 "', which the schema does not allow";
      for (const auto& [j, other] : outs)
        if (j != k && overlap(out, other) && !declared(returns[k], returns[j]))
          return "result " + std::to_string(k) + " shares memory with result " + std::to_string(j) +
                 ", which the schema does not allow";
      outs.emplace_back(k, out);
    }
  }
  return "";
}

bool shares_storage(const Values& earlier, const Values& later, size_t outputs, const Values& exempt) {
  const std::vector<at::Tensor> own = tensors_of(exempt);
  for (const at::Tensor& b : tensors_of(later, outputs)) {
    if (std::any_of(own.begin(), own.end(), [&](const at::Tensor& e) { return overlap(b, e); })) continue;
    for (const at::Tensor& a : tensors_of(earlier, outputs))
      if (overlap(a, b)) return true;
  }
  return false;
}

bool writable(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

bool functional(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns())
    if (r.alias_info()) return false;
  for (const auto& a : schema.arguments())
    if (writable(a)) return false;
  return true;
}

std::vector<bool> unwritable_changes(const c10::FunctionSchema& schema, const Values& before, const Values& after) {
  const auto& params = schema.arguments();
  std::vector<bool> out(params.size(), false);
  // Every tensor the op may not write, unchanged (the common case): one read for all of them.
  // (scalars and None are no change; anything else but tensors and lists of them: one by one below)
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  bool paired = true;
  for (size_t i = 0; i < params.size() && i < before.size() && i < after.size() && paired; ++i) {
    if (writable(params[i])) continue;
    const bool values = before[i].isTensor() || after[i].isTensor() || before[i].isList() || after[i].isList();
    paired = !values || tensor_pairs(before[i], after[i], pairs);
  }
  if (paired && all_equal(pairs)) return out;
  for (size_t i = 0; i < params.size() && i < before.size() && i < after.size(); ++i)
    out[i] = !writable(params[i]) && !identical(before[i], after[i]);
  return out;
}

std::string first_unwritable_change(const c10::FunctionSchema& schema, const Values& before, const Values& after,
                                    const std::vector<bool>& allowed) {
  const std::vector<bool> changed = unwritable_changes(schema, before, after);
  for (size_t i = 0; i < changed.size(); ++i)
    if (changed[i] && !(i < allowed.size() && allowed[i])) return schema.arguments()[i].name();
  return "";
}

bool identical(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor &x = a.toTensor(), &y = b.toTensor();
    if (!x.defined() || !y.defined()) return x.defined() == y.defined();
    return !compare_tensors(x, y, {0, 0});
  }
  if (a.isList() && b.isList()) {
    auto xs = a.toListRef(), ys = b.toListRef();
    if (xs.size() != ys.size()) return false;
    // A list of tensors equal throughout (the common case) is read once, not once per tensor.
    std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
    if (tensor_pairs(a, b, pairs) && all_equal(pairs)) return true;
    for (size_t k = 0; k < xs.size(); ++k)
      if (!identical(xs[k], ys[k])) return false;
  }
  return true;
}

}  // namespace bb::verify
