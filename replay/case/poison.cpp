#include "replay/case/poison.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "replay/timing/cuda_red_zones.h"
#include "replay/timing/cupti_call_timer.h"
#include "replay/timing/red_zone_text.h"
#include "replay/case/spent.h"

namespace bb::replay {
namespace {

std::atomic<int> g_poison{-1};    // the byte, or -1: off
std::atomic<int> g_red_zones{0};  // RedZoneScopes alive

// The allocations made with red zones that are still alive, by their data pointer (the pointer handed
// out is its own context, as c10::Allocator::raw_allocate requires), and the first write outside one
// found as it was freed. (Process state of the kernel worker's, behind the allocator's C interface.)
struct Zoned {
  c10::DataPtr inner;  // the allocation of kRedZone + n + kRedZone bytes
  size_t n = 0;
};
std::mutex g_zoned_mutex;
std::unordered_map<void*, Zoned> g_zoned;
std::string g_stray;
c10::DeleterFnPtr g_inner_raw_delete = nullptr;

// Where the zones of `z` (data at `data`) were written, or "".
std::string zone_damage(const void* data, const Zoned& z) {
  const auto* p = static_cast<const unsigned char*>(data);
  return zone_damage_text(p - kRedZone, p + z.n, kRedZone, z.n);
}

// Frees an allocation with red zones (checking them first), or hands any other pointer to the inner
// allocator's raw deleter.
void free_zoned(void* data) {
  std::optional<Zoned> gone;
  {
    std::lock_guard<std::mutex> lock(g_zoned_mutex);
    auto it = g_zoned.find(data);
    if (it != g_zoned.end()) {
      if (g_stray.empty()) g_stray = zone_damage(data, it->second);
      gone.emplace(std::move(it->second));
      g_zoned.erase(it);
    }
  }
  if (!gone && g_inner_raw_delete) g_inner_raw_delete(data);
}  // (the inner allocation freed here, outside the lock)

class PoisoningAllocator final : public c10::Allocator {
 public:
  explicit PoisoningAllocator(c10::Allocator* inner) : inner_(inner) { g_inner_raw_delete = inner->raw_deleter(); }
  c10::DataPtr allocate(size_t n) override {
    const int byte = g_poison.load(std::memory_order_relaxed);
    if (n && g_red_zones.load(std::memory_order_relaxed) > 0) return zoned(n, byte);
    c10::DataPtr p = inner_->allocate(n);
    if (byte >= 0 && p.get() && n) std::memset(p.get(), byte, n);
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return g_inner_raw_delete ? &free_zoned : nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { inner_->copy_data(dest, src, count); }

 private:
  c10::DataPtr zoned(size_t n, int byte) {
    c10::DataPtr inner = inner_->allocate(n + 2 * kRedZone);
    auto* base = static_cast<unsigned char*>(inner.get());
    if (!base) return inner;
    std::memset(base, kZoneByte, kRedZone);
    std::memset(base + kRedZone + n, kZoneByte, kRedZone);
    if (byte >= 0) std::memset(base + kRedZone, byte, n);
    void* data = base + kRedZone;  // (the inner allocation's alignment kept: kRedZone is a multiple of it)
    const c10::Device device = inner.device();
    {
      std::lock_guard<std::mutex> lock(g_zoned_mutex);
      g_zoned[data] = Zoned{std::move(inner), n};
    }
    return c10::DataPtr(data, data, &free_zoned, device);
  }

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

RedZoneScope::RedZoneScope() {
  g_red_zones.fetch_add(1, std::memory_order_relaxed);
  cuda_red_zones(true);
}
RedZoneScope::~RedZoneScope() {
  g_red_zones.fetch_sub(1, std::memory_order_relaxed);
  cuda_red_zones(false);
}

std::string out_of_bounds_writes() {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(g_zoned_mutex);
    why = std::move(g_stray);
    g_stray.clear();
    for (const auto& [data, z] : g_zoned) {
      if (!why.empty()) break;
      why = zone_damage(data, z);
    }
  }
  std::string on_device = cuda_out_of_bounds_writes();  // (called either way: it forgets what it reports)
  return why.empty() ? on_device : why;
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
