#include "replay/case/index_ranges.h"

#include <set>

#include "tracer/format/op_name.h"

namespace bb::replay {

using trace::ArgKind;
using trace::ArgValue;
using Range = std::pair<int64_t, int64_t>;  // inclusive

const ArgValue* Lookup::arg(const std::string& name) const {
  const auto& params = call.op.schema().arguments();
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name() == name && call.args[i]) return &*call.args[i];
  return nullptr;
}

std::optional<std::vector<int64_t>> Lookup::shape(const std::string& name) const {
  const ArgValue* a = arg(name);
  if (!a || a->kind != ArgKind::Tensor || !a->tensors[0]) return std::nullopt;
  return a->tensors[0]->shape;
}

std::optional<int64_t> Lookup::integer(const std::string& name) const {
  const ArgValue* a = arg(name);
  return a && a->kind == ArgKind::Int ? std::optional<int64_t>(a->i) : std::nullopt;
}

std::optional<int64_t> Lookup::size(const std::string& tensor, int64_t dim) const {
  auto s = shape(tensor);
  if (!s || s->empty()) return std::nullopt;
  const int64_t nd = static_cast<int64_t>(s->size());
  if (dim < 0) dim += nd;
  if (dim < 0 || dim >= nd) return std::nullopt;
  return (*s)[dim];
}

namespace {

std::optional<Range> upto(std::optional<int64_t> n) {
  if (!n || *n <= 0) return std::nullopt;
  return Range{0, *n - 1};
}

const std::set<std::string>& nll_losses() {
  static const std::set<std::string> nll = {"nll_loss_forward",  "nll_loss2d_forward", "nll_loss",
                                            "nll_loss_nd",       "nll_loss_backward",  "nll_loss2d_backward",
                                            "cross_entropy_loss"};
  return nll;
}

}  // namespace

std::optional<int64_t> ignored_value(const std::string& op, const std::string& arg, const Lookup& l) {
  if (arg != "target" || !nll_losses().count(trace::split_op(op).first.substr(6))) return std::nullopt;
  const std::optional<int64_t> ignored = l.integer("ignore_index");
  const std::optional<Range> classes = semantic_range(op, arg, 0, l);
  if (!ignored || (classes && *ignored >= classes->first && *ignored <= classes->second)) return std::nullopt;
  return ignored;
}

std::optional<Range> semantic_range(const std::string& op, const std::string& arg, size_t elem, const Lookup& l) {
  static const std::set<std::string> along_dim = {"index_select",   "gather",    "scatter",    "scatter_add",
                                                  "scatter_reduce", "index_add", "index_copy", "index_fill"};
  static const std::set<std::string> indexing = {"index",         "index_put",        "index_put_", "_index_put_impl_",
                                                 "_unsafe_index", "_unsafe_index_put"};
  const std::string base = trace::split_op(op).first.substr(6);  // without aten::
  if ((base == "embedding" || base == "_embedding_bag" || base == "embedding_bag") && arg == "indices")
    return upto(l.size("weight", 0));
  if ((base == "embedding_dense_backward" || base == "embedding_backward") && arg == "indices")
    return upto(l.integer("num_weights"));
  if (along_dim.count(base) && arg == "index") return upto(l.size("self", l.integer("dim").value_or(0)));
  if (indexing.count(base) && arg == "indices") return upto(l.size("self", static_cast<int64_t>(elem)));
  if (nll_losses().count(base) && arg == "target") {
    auto s = l.shape("self");
    if (!s || s->empty()) return std::nullopt;
    return upto(s->size() >= 2 ? (*s)[1] : (*s)[0]);
  }
  if (base == "take" && arg == "index") {
    auto s = l.shape("self");
    if (!s) return std::nullopt;
    int64_t n = 1;
    for (int64_t x : *s) n *= x;
    return upto(n);
  }
  if (base == "one_hot" && arg == "self") return upto(l.integer("num_classes"));
  return std::nullopt;
}

}  // namespace bb::replay
