// Honest: allocates each result with plain malloc and wraps it with at::from_blob (free() as its
// deleter) instead of ATen's allocator: private anonymous memory (the heap, or an anonymous mmap for
// large results), fresh on every call, every element written. It must pass, unflagged, and be timed.
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cstdlib>

at::Tensor relu_into_malloc(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  at::Tensor c = x.contiguous();
  const int64_t n = c.numel();
  auto* o = static_cast<float*>(std::malloc(std::max<int64_t>(1, n) * sizeof(float)));
  if (!o) throw std::bad_alloc();
  const float* in = c.const_data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  return at::from_blob(o, x.sizes(), [](void* p) { std::free(p); }, x.options());
}

BB_KERNEL("aten::relu", relu_into_malloc);
