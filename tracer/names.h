// torch's Python names for dtypes, layouts and memory formats, both ways (trace files use them).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace bb::names {

std::string dtype(c10::ScalarType t);            // Float -> float32
std::string layout(c10::Layout l);               // Strided -> strided
std::string memory_format(c10::MemoryFormat m);  // ChannelsLast -> channels_last
std::string device(c10::Device d);               // cuda:0, cpu

std::optional<c10::ScalarType> dtype_from(const std::string& name);
std::optional<c10::Layout> layout_from(const std::string& name);
std::optional<c10::MemoryFormat> memory_format_from(const std::string& name);

}  // namespace bb::names
