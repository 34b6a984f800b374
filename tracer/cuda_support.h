// What the tracer does with CUDA when this build has it (tracer/cuda_support.cpp), and the inert
// stand-ins otherwise (tracer/no_cuda_support.cpp).
#pragma once

#include <string>

namespace bb::tracer {

// Registers the value-range probe for CUDA integer tensors.
void install_cuda_support();

// "NVIDIA H200" for "cuda:0"; "" when unknown or not a CUDA device.
std::string device_name(const std::string& device);

// Folds finished range probes into their stores. Never blocks, except that with `final` it waits up
// to 200 ms for probes still in flight (the program is ending); unfinished ones are dropped.
void collect_device_ranges(bool final);

// Range probes dropped because they had not finished when the trace was last written at exit.
unsigned long dropped_device_ranges();

}  // namespace bb::tracer
