#include "replay/timing/red_zone_text.h"

#include <algorithm>
#include <utility>

namespace bb::replay {

std::string zone_damage_text(const unsigned char* before, const unsigned char* after, size_t zone, size_t n,
                             const char* kind) {
  // (bytes written in a zone, and how far from the allocation the nearest of them is)
  auto written = [zone](const unsigned char* bytes, bool is_before) -> std::pair<size_t, size_t> {
    size_t count = 0, nearest = zone;
    for (size_t k = 0; k < zone; ++k)
      if (bytes[k] != kZoneByte) ++count, nearest = std::min(nearest, is_before ? zone - k : k + 1);
    return {count, nearest};
  };
  const auto [in_before, near_before] = written(before, true);
  const auto [in_after, near_after] = written(after, false);
  if (!in_before && !in_after) return "";
  auto bytes = [](size_t k) { return std::to_string(k) + (k == 1 ? " byte" : " bytes"); };
  const std::string allocation = *kind ? std::string("a ") + kind + " allocation" : std::string("an allocation");
  std::string why = "the kernel wrote outside " + allocation + " of " + bytes(n) +
                    " (its own or an argument's), in memory it does not own:";
  if (in_before)
    why += " " + std::to_string(in_before) + " of the " + std::to_string(zone) +
           " bytes before its start (the nearest " + bytes(near_before) + " before it)";
  if (in_before && in_after) why += ",";
  if (in_after)
    why += " " + std::to_string(in_after) + " of the " + std::to_string(zone) + " bytes after its end (the nearest " +
           bytes(near_after) + " after it)";
  return why;
}

}  // namespace bb::replay
