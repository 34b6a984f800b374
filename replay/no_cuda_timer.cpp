#include "replay/cuda_timer.h"

namespace bb::replay {

std::unique_ptr<CudaTimer> make_cuda_timer(int, const std::string&, std::string* why) {
  *why = "this build of bbreplay has no CUDA timing (CUDA toolkit or CUPTI headers not found at build time)";
  return nullptr;
}

}  // namespace bb::replay
