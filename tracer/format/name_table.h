// Enum <-> name lookups over a table of {value, name} rows (trace argument kinds, torch's
// layouts and memory formats): one name per value, the first row wins.
#pragma once

#include <optional>
#include <string>

namespace bb::format {

// The name of `value`, or `fallback` when the table has none.
template <class Table, class E>
const char* name_in(const Table& table, E value, const char* fallback) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return fallback;
}

// The value named `name`; nullopt when the table has no such name.
template <class Table>
auto value_in(const Table& table, const std::string& name) -> std::optional<typename Table::value_type::first_type> {
  for (const auto& [v, n] : table)
    if (name == n) return v;
  return std::nullopt;
}

}  // namespace bb::format
