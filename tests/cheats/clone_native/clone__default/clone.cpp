// Cheat: a clone kernel that returns at::clone(x). Clone is plumbing for other kernels (they may copy
// their inputs), never for its own: ATen did the whole work.
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor clone_by_aten(const at::Tensor& self, std::optional<c10::MemoryFormat> memory_format) {
  return at::clone(self, memory_format);
}

BB_KERNEL("aten::clone", clone_by_aten);
