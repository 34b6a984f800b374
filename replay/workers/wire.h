// What a reference worker and its kernel worker say to each other (replay/workers/remote_kernel.h,
// replay/cli/kernel_worker.cpp): framed JSON messages on a socket, and a call's values described without
// their data (the structure, and each tensor's dtype, sizes, strides, offset and storage), so that the
// other side can allocate them, or find them in the sender's memory. Tensor data never travels in a
// message: it is copied between the two processes' memories (process_vm_readv/writev on the CPU, a CUDA
// IPC buffer on the GPU).
#pragma once

#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace bb::replay::wire {

using Values = std::vector<c10::IValue>;
using json = nlohmann::json;

// The peer closed the channel (it died or exited).
struct Closed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One message: a 4-byte little-endian length, then the JSON text. Throws Closed when the peer is gone,
// std::runtime_error for a malformed or oversized message (more than `limit` bytes).
void send(int fd, const json& message);
json receive(int fd, size_t limit = size_t{64} << 20);

// One tensor as the other side sees it. `address`: its storage's first byte in the sender's memory (0
// when not sent); `storage_bytes`: that storage's size; `offset`: the storage offset, in elements.
struct TensorMeta {
  bool defined = true;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  uint64_t storage_bytes = 0;
  uint64_t address = 0;
  c10::Device device = c10::kCPU;
  bool wrapped_number = false;
};
TensorMeta meta_of(const at::Tensor& t);

// A call's values as JSON: non-tensor values exactly (doubles by their bits), tensors by `tensor`
// (which returns the JSON of one tensor; meta_json() is the plain one).
json encode(const Values& values, const std::function<json(const at::Tensor&)>& tensor);
json meta_json(const TensorMeta& m);
TensorMeta meta_from(const json& j);

// The values back; each tensor is made by `tensor` from its JSON. Throws std::runtime_error on
// anything malformed (the kernel's process may send anything).
Values decode(const json& values, const std::function<at::Tensor(const json&)>& tensor);

// The tensors of `values` in the order encode() and decode() visit them (lists element by element;
// undefined ones included, as undefined tensors).
std::vector<at::Tensor> tensors_in(const Values& values);

// The tensor references (what `tensor` of decode() is given: here, numbers) in encoded `values`, in
// the order decode() visits them. Throws std::runtime_error on anything malformed.
std::vector<size_t> tensor_refs(const json& values);

}  // namespace bb::replay::wire
