#include "replay/timing/cuda_red_zones.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "replay/timing/red_zone_text.h"

namespace bb::replay {
namespace {

namespace cache = c10::cuda::CUDACachingAllocator;

// A block handed out with zones: the inner allocation (kCudaRedZone + n + kCudaRedZone bytes) and n.
struct Zoned {
  c10::DataPtr inner;
  size_t n = 0;
};

// The zoned blocks alive, by the pointer handed out (its own context, as c10::Allocator::raw_allocate
// requires); those freed while zones were on and not yet checked; the first damage found as a block was
// freed. Process state of the kernel worker's, reached from the allocator's function-pointer deleter;
// never destroyed, as blocks may be freed while the process exits.
struct State {
  std::atomic<int> on{0};  // cuda_red_zones(true) calls less cuda_red_zones(false) calls
  std::atomic<bool> installed{false};
  std::mutex mutex;
  std::unordered_map<void*, Zoned> live;
  std::vector<std::pair<void*, Zoned>> kept;
  size_t kept_bytes = 0;
  std::string stray;
  c10::DeleterFnPtr inner_raw_delete = nullptr;
};
State& state() {
  static State* s = new State;
  return *s;
}

// The zones of `z` (handed out at `data`), read back; "" if intact or unreadable (a device that has
// faulted: the case is reported as crashed, not here).
std::string damage(void* data, const Zoned& z) {
  std::vector<unsigned char> bytes(2 * kCudaRedZone);
  const auto* p = static_cast<const unsigned char*>(data);
  if (cudaMemcpy(bytes.data(), p - kCudaRedZone, kCudaRedZone, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(bytes.data() + kCudaRedZone, p + z.n, kCudaRedZone, cudaMemcpyDeviceToHost) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return zone_damage_text(bytes.data(), bytes.data() + kCudaRedZone, kCudaRedZone, z.n, "CUDA");
}

// Whether the device's work so far is done (and may be read); false while a stream captures a graph.
bool synchronized() {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream().stream(), &capturing) != cudaSuccess ||
      capturing != cudaStreamCaptureStatusNone || cudaDeviceSynchronize() != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

// The deleter of zoned blocks: kept from reuse while zones are on (within the quarantine's bytes), else
// checked and freed now. Any other pointer (raw_allocate's, made without zones) goes to the inner
// allocator's raw deleter.
void free_zoned(void* data) {
  std::optional<Zoned> gone;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(data);
    if (it != s.live.end()) {
      Zoned z = std::move(it->second);
      s.live.erase(it);
      if (s.on.load(std::memory_order_relaxed) > 0 && s.kept_bytes + z.n <= kCudaQuarantine) {
        s.kept_bytes += z.n;
        s.kept.emplace_back(data, std::move(z));
        return;
      }
      gone.emplace(std::move(z));
    }
  }
  if (!gone) {
    if (state().inner_raw_delete) state().inner_raw_delete(data);
    return;
  }
  if (synchronized()) {
    std::string why = damage(data, *gone);
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stray.empty()) s.stray = std::move(why);
  }
}  // (the inner block freed here, outside the lock)

// The allocator the process sees: the caching allocator with zones added while on. Every other entry
// passes through; those given a pointer it handed out with zones pass the inner block's.
class ZoningAllocator final : public cache::CUDAAllocator {
 public:
  explicit ZoningAllocator(cache::CUDAAllocator* inner) : inner_(inner) {
    state().inner_raw_delete = inner->raw_deleter();
  }

  c10::DataPtr allocate(size_t n) override {
    if (!n || state().on.load(std::memory_order_relaxed) <= 0) return inner_->allocate(n);
    c10::DataPtr inner = inner_->allocate(n + 2 * kCudaRedZone);
    auto* base = static_cast<unsigned char*>(inner.get());
    if (!base) return inner;
    const c10::Device device = inner.device();
    // (on the stream the block is handed out for, after the caching allocator's own poisoning fill)
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    if (cudaMemsetAsync(base, kZoneByte, kCudaRedZone, stream) != cudaSuccess ||
        cudaMemsetAsync(base + kCudaRedZone + n, kZoneByte, kCudaRedZone, stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return inner;  // (no zones: a block as the caching allocator made it)
    }
    void* data = base + kCudaRedZone;  // (the block's 512-byte alignment kept)
    {
      State& s = state();
      std::lock_guard<std::mutex> lock(s.mutex);
      s.live[data] = Zoned{std::move(inner), n};
    }
    return c10::DataPtr(data, data, &free_zoned, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_zoned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { inner_->copy_data(dest, src, count); }

  void* raw_alloc(size_t nbytes) override { return inner_->raw_alloc(nbytes); }
  void* raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) override {
    return inner_->raw_alloc_with_stream(nbytes, stream);
  }
  void raw_delete(void* ptr) override {
    {
      State& s = state();
      std::lock_guard<std::mutex> lock(s.mutex);
      if (!s.live.count(ptr)) return inner_->raw_delete(ptr);
    }
    free_zoned(ptr);  // (a pointer of raw_allocate's, made with zones)
  }
  void init(int device_count) override { inner_->init(device_count); }
  bool initialized() override { return inner_->initialized(); }
  double getMemoryFraction(c10::DeviceIndex device) override { return inner_->getMemoryFraction(device); }
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override {
    inner_->setMemoryFraction(fraction, device);
  }
  std::vector<cache::StreamSegmentSize> getExpandableSegmentSizes(c10::DeviceIndex device) override {
    return inner_->getExpandableSegmentSizes(device);
  }
  void emptyCache(c10::MempoolId_t mempool_id) override { inner_->emptyCache(mempool_id); }
  void enable(bool value) override { inner_->enable(value); }
  bool isEnabled() const override { return inner_->isEnabled(); }
  void cacheInfo(c10::DeviceIndex device, size_t* largest_block) override { inner_->cacheInfo(device, largest_block); }
  void* getBaseAllocation(void* ptr, size_t* size) override { return inner_->getBaseAllocation(inner_of(ptr), size); }
  using cache::CUDAAllocator::recordStream;
  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    {
      State& s = state();
      std::lock_guard<std::mutex> lock(s.mutex);
      if (auto it = s.live.find(ptr.get()); it != s.live.end()) return inner_->recordStream(it->second.inner, stream);
    }
    inner_->recordStream(ptr, stream);
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return inner_->getDeviceStats(device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { inner_->resetAccumulatedStats(device); }
  void resetPeakStats(c10::DeviceIndex device) override { inner_->resetPeakStats(device); }
  cache::SnapshotInfo snapshot(c10::MempoolId_t mempool_id, bool include_traces) override {
    return inner_->snapshot(mempool_id, include_traces);
  }
  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                           std::function<bool(cudaStream_t)> filter) override {
    inner_->beginAllocateToPool(device, mempool_id, std::move(filter));
  }
  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    inner_->endAllocateToPool(device, mempool_id);
  }
  void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    inner_->releasePool(device, mempool_id);
  }
  int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    return inner_->getPoolUseCount(device, mempool_id);
  }
  void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                          std::shared_ptr<cache::CUDAAllocator> allocator) override {
    inner_->createOrIncrefPool(device, mempool_id, std::move(allocator));
  }
  void setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t mempool_id, bool use_on_oom) override {
    inner_->setUseOnOOM(device, mempool_id, use_on_oom);
  }
  void setNoSplit(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    inner_->setNoSplit(device, mempool_id);
  }
  bool checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                const std::unordered_set<void*>& expected_live_allocations) override {
    return inner_->checkPoolLiveAllocations(device, mempool_id, expected_live_allocations);
  }
  cache::ShareableHandle shareIpcHandle(void* ptr) override { return inner_->shareIpcHandle(inner_of(ptr)); }
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override { return inner_->getIpcDevPtr(std::move(handle)); }
  bool isHistoryEnabled() override { return inner_->isHistoryEnabled(); }
  void recordHistory(bool enabled, cache::CreateContextFn context_recorder, size_t alloc_trace_max_entries,
                     cache::RecordContext when, bool clear_history,
                     const std::vector<std::string>& skip_actions) override {
    inner_->recordHistory(enabled, std::move(context_recorder), alloc_trace_max_entries, when, clear_history,
                          skip_actions);
  }
  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override {
    inner_->recordAnnotation(md);
  }
  void pushCompileContext(std::string& md) override { inner_->pushCompileContext(md); }
  void popCompileContext() override { inner_->popCompileContext(); }
  void setUserMetadata(const std::string& metadata) override { inner_->setUserMetadata(metadata); }
  std::string getUserMetadata() override { return inner_->getUserMetadata(); }
  void attachOutOfMemoryObserver(cache::OutOfMemoryObserver observer) override {
    inner_->attachOutOfMemoryObserver(std::move(observer));
  }
  void attachAllocatorTraceTracker(cache::AllocatorTraceTracker tracker) override {
    inner_->attachAllocatorTraceTracker(std::move(tracker));
  }
  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override {
    inner_->enablePeerAccess(dev, dev_to_access);
  }
  cudaError_t memcpyAsync(void* dst, int dst_device, const void* src, int src_device, size_t count, cudaStream_t stream,
                          bool p2p_enabled) override {
    return inner_->memcpyAsync(dst, dst_device, src, src_device, count, stream, p2p_enabled);
  }
  std::shared_ptr<cache::AllocatorState> getCheckpointState(c10::DeviceIndex device, c10::MempoolId_t id) override {
    return inner_->getCheckpointState(device, id);
  }
  cache::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex device,
                                                std::shared_ptr<cache::AllocatorState> pps) override {
    return inner_->setCheckpointPoolState(device, std::move(pps));
  }
  std::string name() override { return inner_->name(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override { return inner_->getMemoryInfo(device); }

 private:
  // The inner block's pointer of a block handed out with zones; any other pointer as it is.
  static void* inner_of(void* ptr) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(ptr);
    return it == s.live.end() ? ptr : it->second.inner.get();
  }

  cache::CUDAAllocator* inner_;
};

}  // namespace

bool install_cuda_red_zones() {
  static const bool installed = []() -> bool {
    try {
      if (c10::cuda::device_count() <= 0) return false;
      cache::CUDAAllocator* inner = cache::get();
      if (!inner || inner->name() != "native") return false;  // (cudaMallocAsync, or someone else's)
      static ZoningAllocator zoning(inner);
      cache::allocator.store(&zoning);
      c10::SetAllocator(c10::DeviceType::CUDA, &zoning, /*priority=*/UINT8_MAX);
      state().installed.store(true);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }();
  return installed;
}

void cuda_red_zones(bool on) { state().on.fetch_add(on ? 1 : -1, std::memory_order_relaxed); }

std::string cuda_out_of_bounds_writes() {
  if (!state().installed.load()) return "";
  std::vector<std::pair<void*, Zoned>> kept;
  std::string why;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    why = std::move(s.stray);
    s.stray.clear();
    kept.swap(s.kept);
    s.kept_bytes = 0;
  }
  if (!synchronized()) return why;
  for (const auto& [data, z] : kept) {
    if (!why.empty()) break;
    why = damage(data, z);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const auto& [data, z] : s.live) {
    if (!why.empty()) break;
    why = damage(data, z);
  }
  return why;
}  // (the blocks kept from reuse freed here)

void* cuda_allocator() { return cache::get(); }

void set_cuda_allocator(void* allocator) {
  if (!allocator) return;
  auto* a = static_cast<cache::CUDAAllocator*>(allocator);
  cache::allocator.store(a);
  c10::SetAllocator(c10::DeviceType::CUDA, a, /*priority=*/UINT8_MAX);
}

}  // namespace bb::replay
