// Cheat: uses the result it returned last time as its workspace. Each call stages its input in the
// previous call's result of the same shape (which it keeps a handle to, and which the caller still
// holds) and computes a fresh result from there: right values, a fresh buffer every call, no address
// shared with anything — but every call overwrites what the caller was given the call before.
// Expected: aliasing, in the timed loop (the previous result, read again after each later run, changed).
#include <ATen/ATen.h>
#include <bb/kernel.h>

#include <cstring>
#include <map>
#include <vector>

at::Tensor relu_in_previous(const at::Tensor& x) {
  static std::map<std::vector<int64_t>, at::Tensor> previous;
  if (x.scalar_type() != at::kFloat || !x.is_cpu()) throw bb::Decline("CPU float32 only");
  const at::Tensor c = x.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  at::Tensor& scratch = previous[x.sizes().vec()];
  if (scratch.defined() && scratch.is_contiguous() && scratch.numel() == c.numel()) {
    float* s = scratch.mutable_data_ptr<float>();
    std::memcpy(s, in, c.numel() * sizeof(float));
    in = s;
  }
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 || in[i] != in[i] ? in[i] : 0.0f;
  scratch = out;
  return out;
}

BB_KERNEL("aten::relu", relu_in_previous);
