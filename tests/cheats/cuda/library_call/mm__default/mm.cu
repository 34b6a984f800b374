// Cheat: "implements" mm by calling cuBLAS directly (torch's cuBLAS handle, cublasSgemm from the
// libcublas torch loaded): no ATen op is called, so a watch on the dispatcher sees nothing, but
// cuBLAS's kernels do the work.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <bb/kernel.h>
#include <c10/cuda/CUDAGuard.h>
#include <dlfcn.h>

namespace {

using Sgemm = decltype(&cublasSgemm_v2);

Sgemm find_sgemm() {
  if (void* f = dlsym(RTLD_DEFAULT, "cublasSgemm_v2")) return reinterpret_cast<Sgemm>(f);
  for (const char* lib : {"libcublas.so.13", "libcublas.so.12"})
    if (void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD))
      if (void* f = dlsym(h, "cublasSgemm_v2")) return reinterpret_cast<Sgemm>(f);
  return nullptr;
}

at::Tensor mm_by_cublas(const at::Tensor& self, const at::Tensor& mat2) {
  if (!self.is_cuda() || self.scalar_type() != at::kFloat || mat2.scalar_type() != at::kFloat || self.dim() != 2 ||
      mat2.dim() != 2 || self.size(1) != mat2.size(0))
    throw bb::Decline("CUDA float32 matrices only");
  static Sgemm sgemm = find_sgemm();
  if (!sgemm) throw bb::Decline("libcublas is not loaded");
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor a = self.contiguous(), b = mat2.contiguous();
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1)), n = static_cast<int>(b.size(1));
  at::Tensor c = at::empty({m, n}, a.options());
  if (m == 0 || n == 0) return c;
  if (k == 0) return c.zero_();
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();  // bound to the current stream
  const float one = 1.0f, zero = 0.0f;
  // Row-major C = A B is column-major C^T = B^T A^T.
  sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b.const_data_ptr<float>(), n, a.const_data_ptr<float>(), k,
        &zero, c.mutable_data_ptr<float>(), n);
  return c;
}

}  // namespace

BB_KERNEL("aten::mm", mm_by_cublas);
