// aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a): a view of self's storage
// with two sizes and strides swapped (made with as_strided, not by calling transpose).
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <utility>

at::Tensor transpose_view(const at::Tensor& self, int64_t dim0, int64_t dim1) {
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  dim0 = c10::maybe_wrap_dim(dim0, nd);
  dim1 = c10::maybe_wrap_dim(dim1, nd);
  if (self.dim() == 0) return self.as_strided({}, {}, self.storage_offset());
  std::vector<int64_t> sizes = self.sizes().vec(), strides = self.strides().vec();
  std::swap(sizes[dim0], sizes[dim1]);
  std::swap(strides[dim0], strides[dim1]);
  return self.as_strided(sizes, strides, self.storage_offset());
}

BB_KERNEL("aten::transpose.int", transpose_view);
