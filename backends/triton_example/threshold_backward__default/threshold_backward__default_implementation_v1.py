"""aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor in Triton
(BackendBench's layout): 0 where self <= threshold, else grad_output (NaN in self passes the gradient,
as native's `x <= threshold ? 0 : grad`). The threshold is rounded to the inputs' dtype first, as
native's `threshold.to<scalar_t>()`.

Inputs of one shape and dtype (broadcasting declined). Two dense inputs of one layout are read as
flat blocks and the result gets their strides; otherwise both are made contiguous, and so is the result.
"""
import torch
import triton
import triton.language as tl

try:
    from bbshim import Decline  # bbshim gives it to the files it loads: native runs, counted as declined
except ImportError:  # imported outside bbshim (BackendBench, a test of the launch path)
    class Decline(NotImplementedError):
        pass

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
BLOCK = 1024


@triton.jit
def _threshold_backward_kernel(g_ptr, x_ptr, out_ptr, n, threshold, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask)
    x = tl.load(x_ptr + offs, mask=mask)
    # native compares in the inputs' dtype: the threshold rounded to it (x and it exact in float32)
    t = (tl.zeros([BLOCK], dtype=tl.float32) + threshold).to(x.dtype).to(tl.float32)
    tl.store(out_ptr + offs, tl.where(x.to(tl.float32) <= t, 0.0, g.to(tl.float32)), mask=mask)


def dense(t):
    """Whether t's elements fill its memory exactly (non-overlapping and dense): empty_like(t) then has
    t's strides, and element k of the one's memory is element k of the other's."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def threshold_backward(grad, x, threshold):
    """The launch path, for any tensors Triton can address (CPU ones under TRITON_INTERPRET=1)."""
    if grad.stride() != x.stride() or not dense(x):
        grad, x = grad.contiguous(), x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _threshold_backward_kernel[(triton.cdiv(n, BLOCK),)](grad, x, out, n, float(threshold), BLOCK=BLOCK)
    return out


def threshold_backward__default_kernel_impl(grad_output, self, threshold):
    if not self.is_cuda or grad_output.device != self.device:
        raise Decline("CUDA tensors on one device only")
    if grad_output.shape != self.shape or grad_output.dtype != self.dtype:
        raise Decline("broadcasting and mixed dtypes not handled")
    if self.dtype not in FLOATS:
        raise Decline("float32, float16 and bfloat16 only")
    if isinstance(threshold, (complex, bool)):
        raise Decline("a real threshold only")
    with torch.cuda.device(self.device):
        return threshold_backward(grad_output, self, threshold)
