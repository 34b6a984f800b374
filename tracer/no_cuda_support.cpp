#include "tracer/cuda_support.h"

namespace bb::tracer {

void install_cuda_support(const DeviceTimingOptions&, bool, const std::string&) {}
std::string device_name(const std::string&) { return ""; }
void collect_device_ranges(bool) {}
unsigned long dropped_device_ranges() { return 0; }
bool device_timing_needs_every_call() { return false; }
DeviceTimeSnapshot device_time_snapshot() { return {"off: built without CUDA", {}, {}}; }
devtime::Collector::Timeline device_timeline() { return {}; }
void forget_device_timing() {}

}  // namespace bb::tracer
