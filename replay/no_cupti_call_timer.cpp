#include "replay/cupti_call_timer.h"

namespace bb::replay {

std::unique_ptr<CuptiCallTimer> make_cupti_call_timer(int, const std::string&, std::string* why) {
  *why = "this build of bbreplay has no CUDA timing (CUDA toolkit or CUPTI headers not found at build time)";
  return nullptr;
}

bool poison_cuda_cache(int, uint8_t, size_t) { return false; }

uint64_t cuda_free_bytes() { return 0; }

}  // namespace bb::replay
