// Valid values for index-like integer inputs (embedding indices, gather/scatter/index indices, nll_loss
// targets, take, one_hot), from what the op does with them and the shapes of its other arguments: what
// replay draws such inputs within (replay/case/inputs.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "replay/case/inputs.h"

namespace bb::replay {

// The bound call's values by schema argument name.
struct Lookup {
  const BoundCall& call;
  const trace::ArgValue* arg(const std::string& name) const;
  std::optional<std::vector<int64_t>> shape(const std::string& name) const;
  std::optional<int64_t> integer(const std::string& name) const;
  std::optional<int64_t> size(const std::string& tensor, int64_t dim) const;  // dim may count from the end
};

// Inclusive [lo, hi] for element `elem` of argument `arg` of `op` (a full overload name); nullopt when
// the op says nothing of that argument's values.
std::optional<std::pair<int64_t, int64_t>> semantic_range(const std::string& op, const std::string& arg, size_t elem,
                                                          const Lookup& l);

// The value outside semantic_range() that argument `arg` of `op` may still hold, with a meaning of its
// own: a loss's target equal to its ignore_index (-100 in Hugging Face's causal-LM loss, on every
// sequence's last position), a row that contributes nothing. nullopt for every other argument, and where
// the ignore_index lies among the classes (drawn there anyway).
std::optional<int64_t> ignored_value(const std::string& op, const std::string& arg, const Lookup& l);

}  // namespace bb::replay
