#include "replay/case/poison.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>

#include "replay/timing/cupti_call_timer.h"
#include "replay/case/spent.h"

namespace bb::replay {
namespace {

std::atomic<int> g_poison{-1};  // the byte, or -1: off

class PoisoningAllocator final : public c10::Allocator {
 public:
  explicit PoisoningAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr p = inner_->allocate(n);
    const int byte = g_poison.load(std::memory_order_relaxed);
    if (byte >= 0 && p.get() && n) std::memset(p.get(), byte, n);
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { inner_->copy_data(dest, src, count); }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void install_poisoning_allocator() {
  static PoisoningAllocator allocator(c10::GetCPUAllocator());
  static bool installed = [] {
    c10::SetCPUAllocator(&allocator, /*priority=*/200);
    return true;
  }();
  (void)installed;
}

PoisonScope::PoisonScope(uint8_t byte, const c10::Device& device) : cpu_(device.is_cpu()) {
  if (cpu_) {
    g_poison.store(byte, std::memory_order_relaxed);
  } else if (device.is_cuda()) {
    Spent spent(phase::kIntegrity);  // (the first scope attaches to the allocator)
    cuda_ = poison_cuda_allocations(byte);
  }
}

PoisonScope::~PoisonScope() {
  if (cpu_) g_poison.store(-1, std::memory_order_relaxed);
  if (cuda_) poison_cuda_allocations(-1);
}

}  // namespace bb::replay
