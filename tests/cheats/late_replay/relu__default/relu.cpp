// Cheat: honest for its first four calls (a harness that checks once sees a correct kernel), then
// returns its last result again without computing anything.
#include <ATen/ATen.h>
#include <bb/kernel.h>

at::Tensor late_replay_relu(const at::Tensor& x) {
  static int calls = 0;
  static at::Tensor last;
  if (x.scalar_type() != at::kFloat) throw bb::Decline("float32 only");
  if (++calls > 4 && last.defined() && last.sizes() == x.sizes()) return last.clone();
  at::Tensor c = x.contiguous(), out = at::empty(x.sizes(), x.options());
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) o[i] = in[i] > 0 ? in[i] : 0.0f;
  last = out.clone();
  return out;
}

BB_KERNEL("aten::relu", late_replay_relu);
