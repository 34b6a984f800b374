// Memory limits of a replay: how much one case may take, and how much a worker process may allocate
// (docs/replay.md, "Memory"). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace bb::replay {

// A case holds its values several times over at its peak: native's and the kernel's inputs, copies kept
// to check that inputs were left alone, results, the float64 reference, the timing pairs' fresh inputs.
// Measured on the CPU (2026-12-01): a worker's peak was 5-5.5 times a case's inputs and results
// (relu on float32[64,1024,1024], add on bfloat16, mm on bfloat16[4096,4096]); the default budget of
// a case is the free memory divided by this, with a margin.
constexpr uint64_t kCaseCopies = 8;

// A case at least this large (its values) gives the device memory it held back when it ends, in both
// processes (the kernel's shared buffer, the caching allocators): below it, what is cached is kept for the
// next case.
constexpr uint64_t kLargeCase = uint64_t{1} << 30;

// How many bytes of values one describe may read back from the kernel's process, where no case's budget
// says more (a kernel's process may claim any size).
constexpr uint64_t kDefaultReadLimit = uint64_t{8} << 30;

// "123", "512K", "1.5G", "2T" (binary units, a trailing "B" or "iB" allowed); nullopt when not a size.
std::optional<uint64_t> parse_bytes(const std::string& text);
// "2.5 GiB", "512 MiB", "100 B".
std::string format_bytes(uint64_t bytes);

// The machine's available memory (MemAvailable of /proc/meminfo), 0 when unknown.
uint64_t available_host_bytes();

// Limits the memory this process may allocate from now on to `bytes` (RLIMIT_DATA, set to what it holds
// already plus `bytes`: heap and private mappings, which is where torch's CPU tensors live, and where the
// data of the libraries loaded so far is too: 0.6 GB with torch's CUDA wheel) so that an allocation
// beyond it fails (c10 throws) instead of taking the machine's memory. "" on success, else why not.
std::string limit_process_memory(uint64_t bytes);

// What the message of an allocation that failed (c10's "can't allocate memory", std::bad_alloc, ENOMEM)
// gains in a process whose memory is limited: the limit, and the option that sets it. "" for any other
// message, or where the process has no limit.
std::string host_limit_note(const std::string& what);

}  // namespace bb::replay
