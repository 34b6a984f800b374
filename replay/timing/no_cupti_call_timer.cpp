#include "replay/timing/cuda_red_zones.h"
#include "replay/timing/cupti_call_timer.h"
#include "replay/timing/ipc_buffer.h"

namespace bb::replay {

std::unique_ptr<CuptiCallTimer> make_cupti_call_timer(int, const std::string&, std::string* why) {
  *why = "this build of bbreplay has no CUDA timing (CUDA toolkit or CUPTI headers not found at build time)";
  return nullptr;
}

bool poison_cuda_allocations(int) { return false; }

uint64_t cuda_free_bytes() { return 0; }

bool install_cuda_red_zones() { return false; }
void cuda_red_zones(bool) {}
std::string cuda_out_of_bounds_writes() { return ""; }
void* cuda_allocator() { return nullptr; }
void set_cuda_allocator(void*) {}

std::string ipc_create(int, size_t, IpcBuffer*, std::string*) { return "this build of bbreplay has no CUDA parts"; }
std::string ipc_open(int, const std::string&, size_t, IpcBuffer*) { return "this build of bbreplay has no CUDA parts"; }
void ipc_close(IpcBuffer*) {}

}  // namespace bb::replay
