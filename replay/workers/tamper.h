// What a kernel's code could change in its own process to fool what bbreplay measures there, taken once
// the kernel worker is set up and compared after every case (replay/cli/kernel_worker.cpp): bbreplay's own
// code and the functions it imports (its GOT, read-only after loading: -z relro -z now), syscalls
// intercepted (a seccomp filter, a tracer attached), a userfaultfd (memory that computes itself when
// read), and the dispatcher's entries of the aten ops (a kernel registered over ATen's own). These are
// the second line (docs/integrity.md): what the kernel's process says of itself; the first line is
// outside it (the reference process's clock and reads of the kernel's memory).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

// Marks a function of the timing path (the code a host-timed run of the kernel worker goes through between
// its two clock readings): kept in a section of its own, whose code is hashed after every case.
#define BB_TIMING_PATH __attribute__((section("bb_timing_path"), noinline))

namespace bb::replay {

// A monotonic clock read by a system call made from this library's own code: no GOT entry, no vDSO or
// libc code on the way, so that a kernel can move it only by changing this library's code (which
// code_changes() sees) or the time the OS keeps.
uint64_t raw_monotonic_ns();

// This library's executable code, its relocated read-only data (its GOT among it), and the first bytes
// of every function its GOT points to (a patch at the entry of an imported function).
struct CodeImage {
  uint64_t timing_path = 0, text = 0, relro = 0, targets = 0;
  size_t functions = 0;  // GOT entries of functions looked at
  std::string error;     // why the image could not be taken ("" when it was)
};
// `whole`: all of the library's code (2 MB: a few hundred µs); else its timing path only, the rest left 0.
CodeImage take_code_image(bool whole = true);
// "" or what differs from `before`: the timing path, the GOT and the imported functions' entries every
// time, the whole code when `whole`.
std::string code_changes(const CodeImage& before, bool whole);

// This process's seccomp mode and number of filters, and its tracer (/proc/self/status); "" or what
// differs from `before`.
struct SyscallWatch {
  std::string seccomp, filters, tracer;
};
SyscallWatch syscall_watch();
std::string syscall_changes(const SyscallWatch& before);

// "" or which of this process's file descriptors are userfaultfds.
std::string userfaultfds();

// Refuses this process and its children userfaultfd (the system call, and /dev/userfaultfd's ioctl): memory
// whose pages a handler of the kernel's fills when they are first read, by bbreplay too, could hold results
// computed after the clock stopped. A seccomp filter; "" or why it could not be installed.
std::string refuse_userfaultfd();

// Every aten operator's registrations (how many kernels are registered for it) and which dispatch keys
// have a backend fallback.
struct DispatcherImage {
  std::vector<std::pair<c10::OperatorHandle, size_t>> ops;
  std::vector<const size_t*> counters;  // by_layout: each op's count in the dispatcher's record, as ops
  std::vector<bool> fallbacks;
  size_t op_count = 0;
  bool by_layout = true;  // counts read from the dispatcher's own record; else from dumpState() hashes
};
DispatcherImage take_dispatcher_image();
// The aten operators whose registrations changed since `before` ("aten::relu (1 more kernel registered)"),
// and dispatch keys that gained a fallback; empty when none did.
std::vector<std::string> dispatcher_changes(const DispatcherImage& before);

}  // namespace bb::replay
