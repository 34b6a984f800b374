// Red zones (replay/case/poison.h): writes outside an allocation made in a RedZoneScope are found, alive
// or freed; nothing is said of writes inside; raw allocations work under them; none outside a scope. The
// same of CUDA allocations where there is a device.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <dlfcn.h>
#include <unistd.h>

#include "catch.h"
#include "replay/case/poison.h"
#include "replay/timing/cuda_red_zones.h"
#include "replay/workers/process_state.h"

using bb::replay::out_of_bounds_writes;
using bb::replay::RedZoneScope;

TEST_CASE("writes outside an allocation made in a red-zone scope are found, inside ones are not") {
  bb::replay::install_poisoning_allocator();
  (void)out_of_bounds_writes();
  at::Tensor inside, after, before;
  {
    RedZoneScope zones;
    inside = at::empty({10}, at::kFloat);
    after = at::empty({10}, at::kFloat);
    before = at::empty({10}, at::kFloat);
  }
  inside.fill_(1);  // (all ten elements, nothing beyond)
  CHECK(out_of_bounds_writes().empty());
  after.data_ptr<float>()[10] = 0;  // one float past the end
  const std::string past = out_of_bounds_writes();
  CHECK(past.find("allocation of 40 bytes") != std::string::npos);
  CHECK(past.find("4 of the 4096 bytes after its end (the nearest 1 byte after it)") != std::string::npos);
  CHECK(out_of_bounds_writes().empty() == false);  // (alive and still damaged: found again)
  after.reset();                                   // freed: said once more, then forgotten
  CHECK_FALSE(out_of_bounds_writes().empty());
  CHECK(out_of_bounds_writes().empty());
  before.data_ptr<float>()[-3] = 0;  // (bytes 12 to 9 before its start)
  CHECK(out_of_bounds_writes().find("4 of the 4096 bytes before its start (the nearest 9 bytes before it)") !=
        std::string::npos);
  before.reset();
  (void)out_of_bounds_writes();
}

TEST_CASE("raw allocations work under red zones, and allocations outside a scope have none") {
  bb::replay::install_poisoning_allocator();
  c10::Allocator* a = c10::GetCPUAllocator();
  void* raw = nullptr;
  {
    RedZoneScope zones;
    raw = a->raw_allocate(100);
  }
  REQUIRE(raw);
  static_cast<char*>(raw)[100] = 1;
  a->raw_deallocate(raw);  // (the zoned pointer freed by the allocator's raw deleter, its damage said)
  CHECK(out_of_bounds_writes().find("after its end") != std::string::npos);
  void* plain = a->raw_allocate(100);
  a->raw_deallocate(plain);
  at::Tensor t = at::empty({4}, at::kFloat);
  t.fill_(2);
  CHECK(out_of_bounds_writes().empty());
}

// CUDA: the caching allocator wrapped (replay/timing/cuda_red_zones.h). Skipped without a device.
namespace {

c10::TensorOptions on_cuda(at::ScalarType t) { return at::TensorOptions().dtype(t).device(at::kCUDA); }

// Clears `count` bytes at `offset` from t's first byte, on the device (as a kernel's stray store would).
void stray(const at::Tensor& t, int64_t offset, int64_t count) {
  at::from_blob(static_cast<char*>(t.data_ptr()) + offset, {count}, on_cuda(at::kByte)).fill_(0);
}

}  // namespace

TEST_CASE("CUDA allocations made under red zones: writes outside them are found on the device") {
  // (torch's CUDA kernels live in libtorch_cuda, which nothing here links: loaded as bbreplay loads it)
  const std::string torch_cuda = std::string(BB_TORCH_LIB_DIR) + "/libtorch_cuda.so";
  void* caching = bb::replay::cuda_allocator();  // (the caching allocator itself, before the wrapper)
  if (::access(torch_cuda.c_str(), R_OK) != 0 || !::dlopen(torch_cuda.c_str(), RTLD_NOW | RTLD_GLOBAL) ||
      !bb::replay::install_cuda_red_zones()) {
    WARN("no CUDA device (or not the native caching allocator): skipped");
    return;
  }
  // A kernel that puts the caching allocator back in place (its allocations out of the zones) changes
  // the kernel worker's process state: said, and set back.
  CHECK(bb::replay::cuda_allocator() != caching);
  const bb::replay::ProcessState zoned = bb::replay::process_state();
  bb::replay::set_cuda_allocator(caching);
  CHECK(bb::replay::restore_process_state(zoned) == "the CUDA allocator");
  CHECK(bb::replay::cuda_allocator() == zoned.cuda_allocator);

  (void)out_of_bounds_writes();
  at::Tensor inside, after, before;
  {
    RedZoneScope zones;
    inside = at::empty({10}, on_cuda(at::kFloat));
    after = at::empty({10}, on_cuda(at::kFloat));
    before = at::empty({10}, on_cuda(at::kFloat));
  }
  inside.fill_(1);
  CHECK(out_of_bounds_writes().empty());
  CHECK(inside.sum().item<float>() == 10.f);  // (zoned blocks are ordinary tensors to torch)
  stray(after, 40, 4);                        // one float past the end
  const std::string past = out_of_bounds_writes();
  CHECK(past.find("a CUDA allocation of 40 bytes") != std::string::npos);
  CHECK(past.find("4 of the 4096 bytes after its end (the nearest 1 byte after it)") != std::string::npos);
  CHECK_FALSE(out_of_bounds_writes().empty());  // (alive and still damaged: found again)
  after.reset();                                // freed outside a scope: checked then, said once
  CHECK_FALSE(out_of_bounds_writes().empty());
  CHECK(out_of_bounds_writes().empty());
  stray(before, -12, 4);
  CHECK(out_of_bounds_writes().find("4 of the 4096 bytes before its start (the nearest 9 bytes before it)") !=
        std::string::npos);
  before.reset();
  (void)out_of_bounds_writes();

  // Freed inside a scope, a block is kept from reuse until the check: a write into it after it was freed
  // (to memory next to it, here) is still found.
  {
    RedZoneScope zones;
    at::Tensor scratch = at::empty({1000}, on_cuda(at::kFloat));
    char* where = static_cast<char*>(scratch.data_ptr());
    scratch.reset();
    at::from_blob(where + 4000, {4}, on_cuda(at::kByte)).fill_(0);
  }
  CHECK(out_of_bounds_writes().find("after its end (the nearest 1 byte after it)") != std::string::npos);

  // Library work under zones (cuBLAS's workspace, a reduction's scratch) and a block used on a second
  // stream: nothing said, the results right.
  {
    RedZoneScope zones;
    at::Tensor a = at::ones({64, 64}, on_cuda(at::kFloat));
    CHECK(at::mm(a, a).sum().item<float>() == 64.f * 64 * 64);
    c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
    a.record_stream(impl.getStreamFromGlobalPool(a.device()));
  }
  CHECK(out_of_bounds_writes().empty());

  // Outside a scope, none: a write past the 10 floats of a plain tensor (inside its cached block) is not
  // this check's to see.
  at::Tensor plain = at::empty({10}, on_cuda(at::kFloat));
  stray(plain, 40, 4);
  CHECK(out_of_bounds_writes().empty());
}
