#include "replay/case/derived_args.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>

#include "tracer/format/op_name.h"

namespace bb::replay {
namespace {

using Values = std::vector<c10::IValue>;

// The call's values by schema argument name.
struct Args {
  const c10::FunctionSchema& schema;
  Values& values;
  c10::IValue& operator[](const std::string& name) const {
    for (size_t i = 0; i < schema.arguments().size() && i < values.size(); ++i)
      if (schema.arguments()[i].name() == name) return values[i];
    throw std::invalid_argument("no argument '" + name + "'");
  }
  at::Tensor tensor(const std::string& name) const { return (*this)[name].toTensor(); }
  std::optional<at::Tensor> optional(const std::string& name) const {
    const c10::IValue& v = (*this)[name];
    return v.isTensor() ? std::optional<at::Tensor>(v.toTensor()) : std::nullopt;
  }
  std::vector<int64_t> ints(const std::string& name) const { return (*this)[name].toIntVector(); }
  // Puts `made` in place of argument `name`, in the dtype, device and layout it was traced with.
  void set(const std::string& name, const at::Tensor& made) const {
    c10::IValue& slot = (*this)[name];
    if (!slot.isTensor() || !slot.toTensor().defined()) return;  // (None: nothing to derive)
    const at::Tensor& was = slot.toTensor();
    if (made.sizes() != was.sizes())
      throw std::invalid_argument("cannot derive '" + name + "': the forward op gives shape " + c10::str(made.sizes()) +
                                  ", the call has " + c10::str(was.sizes()));
    was.copy_(made);  // keeps the traced strides and storage
  }
};

using Rule = std::function<void(const Args&)>;

void max_pool_indices(const Args& a, int dims) {
  const at::Tensor self = a.tensor("self");
  const auto k = a.ints("kernel_size"), s = a.ints("stride"), p = a.ints("padding"), d = a.ints("dilation");
  const bool ceil = a["ceil_mode"].toBool();
  a.set("indices", dims == 2 ? std::get<1>(at::max_pool2d_with_indices(self, k, s, p, d, ceil))
                             : std::get<1>(at::max_pool3d_with_indices(self, k, s, p, d, ceil)));
}

void adaptive_max_pool_indices(const Args& a, int dims) {
  const at::Tensor self = a.tensor("self"), grad = a.tensor("grad_output");
  const auto out = grad.sizes().slice(grad.dim() - dims).vec();
  a.set("indices",
        dims == 2 ? std::get<1>(at::adaptive_max_pool2d(self, out)) : std::get<1>(at::adaptive_max_pool3d(self, out)));
}

void layer_norm_stats(const Args& a) {
  auto [out, mean, rstd] = at::native_layer_norm(a.tensor("input"), a.ints("normalized_shape"), a.optional("weight"),
                                                 a.optional("bias"), 1e-5);
  a.set("mean", mean);
  a.set("rstd", rstd);
}

void batch_norm_stats(const Args& a) {
  if (!a["train"].toBool()) return;  // (eval: the running statistics are used, not saved ones)
  auto [out, mean, invstd] = at::native_batch_norm(a.tensor("input"), a.optional("weight"), std::nullopt, std::nullopt,
                                                   std::nullopt, true, 0.1, a["eps"].toDouble());
  a.set("save_mean", mean);
  a.set("save_invstd", invstd);
}

void group_norm_stats(const Args& a) {
  auto [out, mean, rstd] = at::native_group_norm(a.tensor("input"), a.optional("weight"), std::nullopt, a["N"].toInt(),
                                                 a["C"].toInt(), a["HxW"].toInt(), a["group"].toInt(), 1e-5);
  a.set("mean", mean);
  a.set("rstd", rstd);
}

// The sum of the weights of the targets not ignored (their count without weights): what the forward
// gave the backward. Drawn at random it was any number, a target equal to ignore_index not counted out.
void nll_total_weight(const Args& a, bool two_d) {
  const at::Tensor self = a.tensor("self"), target = a.tensor("target");
  const std::optional<at::Tensor> weight = a.optional("weight");
  const int64_t reduction = a["reduction"].toInt(), ignored = a["ignore_index"].toInt();
  a.set("total_weight", std::get<1>(two_d ? at::nll_loss2d_forward(self, target, weight, reduction, ignored)
                                          : at::nll_loss_forward(self, target, weight, reduction, ignored)));
}

// The generated `output` read as logits: the softmax of them is an output softmax could have given.
void softmax_output(const Args& a, bool log) {
  const at::Tensor x = a.tensor("output");
  const int64_t dim = a["dim"].toInt();
  a.set("output", log ? at::_log_softmax(x, dim, false) : at::_softmax(x, dim, false));
}

struct Entry {
  std::vector<std::string> args;
  Rule rule;
};

const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = {
      {"aten::max_pool2d_with_indices_backward", {{"indices"}, [](const Args& a) { max_pool_indices(a, 2); }}},
      {"aten::max_pool3d_with_indices_backward", {{"indices"}, [](const Args& a) { max_pool_indices(a, 3); }}},
      {"aten::adaptive_max_pool2d_backward", {{"indices"}, [](const Args& a) { adaptive_max_pool_indices(a, 2); }}},
      {"aten::adaptive_max_pool3d_backward", {{"indices"}, [](const Args& a) { adaptive_max_pool_indices(a, 3); }}},
      {"aten::native_layer_norm_backward", {{"mean", "rstd"}, layer_norm_stats}},
      {"aten::native_batch_norm_backward", {{"save_mean", "save_invstd"}, batch_norm_stats}},
      {"aten::native_group_norm_backward", {{"mean", "rstd"}, group_norm_stats}},
      {"aten::_softmax_backward_data", {{"output"}, [](const Args& a) { softmax_output(a, false); }}},
      {"aten::_log_softmax_backward_data", {{"output"}, [](const Args& a) { softmax_output(a, true); }}},
      {"aten::nll_loss_backward", {{"total_weight"}, [](const Args& a) { nll_total_weight(a, false); }}},
      {"aten::nll_loss2d_backward", {{"total_weight"}, [](const Args& a) { nll_total_weight(a, true); }}},
  };
  return t;
}

const Entry* entry_of(const c10::FunctionSchema& schema) {
  auto it = table().find(trace::join_op(schema.name(), schema.overload_name()));
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace

bool is_derived(const c10::FunctionSchema& schema, const std::string& name) {
  const Entry* e = entry_of(schema);
  return e && std::find(e->args.begin(), e->args.end(), name) != e->args.end();
}

void derive_arguments(const BoundCall& call, Values& values) {
  const auto& schema = call.op.schema();
  const Entry* entry = entry_of(schema);
  if (!entry) return;
  try {
    entry->rule(Args{schema, values});
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::invalid_argument("cannot derive " + schema.name() + "'s saved arguments from its forward op: " +
                                std::string(e.what()).substr(0, std::string(e.what()).find('\n')));
  }
}

}  // namespace bb::replay
