// A device buffer shared by a reference worker and its kernel worker (CUDA IPC): the reference makes it
// and copies the kernel's inputs into it; the kernel worker copies them out into memory of its own, and
// copies its results and arguments after a call into it for the reference to read. Only values the
// kernel may see pass through it: its own inputs and results, never native's.
#pragma once

#include <cstddef>
#include <string>

namespace bb::replay {

struct IpcBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool imported = false;
};

// Allocates `bytes` on `device` and exports it; `handle` gets the IPC handle as hex. "" or why not.
std::string ipc_create(int device, size_t bytes, IpcBuffer* out, std::string* handle);
// Opens a buffer another process exported. "" or why not.
std::string ipc_open(int device, const std::string& handle, size_t bytes, IpcBuffer* out);
// Frees (or closes) it; nothing when it holds none.
void ipc_close(IpcBuffer* b);

}  // namespace bb::replay
