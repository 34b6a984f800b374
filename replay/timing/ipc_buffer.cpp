#include "replay/timing/ipc_buffer.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

namespace bb::replay {
namespace {

std::string failed(const char* what, cudaError_t e) {
  cudaGetLastError();  // (not left for the next CUDA call to report)
  return std::string(what) + " failed: " + cudaGetErrorString(e);
}

}  // namespace

std::string ipc_create(int device, size_t bytes, IpcBuffer* out, std::string* handle) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return failed("cudaSetDevice", e);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) return failed("cudaMalloc", e);
  cudaIpcMemHandle_t h;
  if (cudaError_t e = cudaIpcGetMemHandle(&h, p); e != cudaSuccess) {
    cudaFree(p);
    return failed("cudaIpcGetMemHandle", e);
  }
  handle->clear();
  char hex[3];
  for (size_t i = 0; i < sizeof h.reserved; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(h.reserved[i]));
    *handle += hex;
  }
  *out = {p, bytes, false};
  return "";
}

std::string ipc_open(int device, const std::string& handle, size_t bytes, IpcBuffer* out) {
  cudaIpcMemHandle_t h;
  if (handle.size() != 2 * sizeof h.reserved) return "a malformed CUDA IPC handle";
  for (size_t i = 0; i < sizeof h.reserved; ++i) {
    unsigned v = 0;
    if (std::sscanf(handle.c_str() + 2 * i, "%2x", &v) != 1) return "a malformed CUDA IPC handle";
    h.reserved[i] = static_cast<char>(v);
  }
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return failed("cudaSetDevice", e);
  void* p = nullptr;
  if (cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess)
    return failed("cudaIpcOpenMemHandle", e);
  *out = {p, bytes, true};
  return "";
}

void ipc_close(IpcBuffer* b) {
  if (!b->ptr) return;
  if (b->imported) cudaIpcCloseMemHandle(b->ptr);
  else
    cudaFree(b->ptr);
  *b = {};
}

}  // namespace bb::replay
