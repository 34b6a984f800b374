// What a damaged red zone says: the bytes around an allocation (host copies of them), read back after a
// kernel ran, in words. Shared by the CPU red zones (replay/case/poison.h) and the CUDA ones
// (cuda_red_zones.h); torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bb::replay {

// The byte red zones hold: not a poison byte, not 0, so that a kernel's stray zero or NaN shows.
inline constexpr uint8_t kZoneByte = 0xCB;

// "" when the `zone` bytes before an allocation of `n` bytes (`before`) and the `zone` bytes after it
// (`after`) all still hold kZoneByte; else which were written and how near the allocation the nearest is.
// `kind`: "" or a word for the memory ("CUDA": "a CUDA allocation").
std::string zone_damage_text(const unsigned char* before, const unsigned char* after, size_t zone, size_t n,
                             const char* kind = "");

}  // namespace bb::replay
