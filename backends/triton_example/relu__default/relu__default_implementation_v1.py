"""aten::relu(Tensor self) -> Tensor in Triton (BackendBench's layout): one program per 1024 elements.

A dense input (its elements fill its memory, whatever the order of its dims) is read as the flat
block it is and the result gets its strides, as native's; any other layout is made contiguous first.
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
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)  # (exact; stored back in the input's dtype)
    tl.store(out_ptr + offs, tl.where((x > 0) | (x != x), x, 0.0), mask=mask)  # NaN stays NaN


def dense(t):
    """Whether t's elements fill its memory exactly (non-overlapping and dense): empty_like(t) then has
    t's strides, and element k of the one's memory is element k of the other's."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def relu(x):
    """The launch path, for any tensor Triton can address (CPU ones under TRITON_INTERPRET=1)."""
    src = x if dense(x) else x.contiguous()
    out = torch.empty_like(src)
    n = src.numel()
    if n:
        _relu_kernel[(triton.cdiv(n, BLOCK),)](src, out, n, BLOCK=BLOCK)
    return out


def relu__default_kernel_impl(self):
    if not self.is_cuda:
        raise Decline("CUDA tensors only")
    if self.dtype not in FLOATS:
        raise Decline("float32, float16 and bfloat16 only")
    with torch.cuda.device(self.device):
        return relu(self)
