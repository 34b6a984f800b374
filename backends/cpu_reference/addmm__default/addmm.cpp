// aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor,
// CPU reference: beta * self + alpha * (mat1 @ mat2), self broadcast to [n, m]; with beta == 0
// self is not read (NaN in it must not leak through). Accumulates in double.
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <vector>

namespace {

template <typename T>
void addmm_loop(const T* bias, const T* a, const T* b, T* out, int64_t n, int64_t k, int64_t m, double beta,
                double alpha) {
  std::vector<double> row(m);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double aip = a[i * k + p];
      const T* brow = b + p * m;
      for (int64_t j = 0; j < m; ++j) row[j] += aip * brow[j];
    }
    for (int64_t j = 0; j < m; ++j)
      out[i * m + j] = static_cast<T>(alpha * row[j] + (beta == 0 ? 0.0 : beta * bias[i * m + j]));
  }
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  for (const auto* t : {&self, &mat1, &mat2})
    if (!t->device().is_cpu() || t->scalar_type() != mat1.scalar_type()) throw bb::Decline("CPU, one dtype");
  if (mat1.dim() != 2 || mat2.dim() != 2 || mat1.size(1) != mat2.size(0)) throw bb::Decline("shapes");
  const int64_t n = mat1.size(0), k = mat1.size(1), m = mat2.size(1);
  at::Tensor bias = self.expand({n, m}).contiguous();
  at::Tensor a = mat1.contiguous(), b = mat2.contiguous();
  at::Tensor out = at::empty({n, m}, mat1.options());
  if (mat1.scalar_type() == at::kFloat) {
    addmm_loop(bias.const_data_ptr<float>(), a.const_data_ptr<float>(), b.const_data_ptr<float>(),
               out.mutable_data_ptr<float>(), n, k, m, beta.to<double>(), alpha.to<double>());
  } else if (mat1.scalar_type() == at::kDouble) {
    addmm_loop(bias.const_data_ptr<double>(), a.const_data_ptr<double>(), b.const_data_ptr<double>(),
               out.mutable_data_ptr<double>(), n, k, m, beta.to<double>(), alpha.to<double>());
  } else {
    throw bb::Decline("float32 and float64 only");
  }
  return out;
}

}  // namespace

BB_KERNEL("aten::addmm", addmm);
