"""aten::gelu(Tensor self, *, str approximate='none') -> Tensor in Triton (BackendBench's layout),
elementwise in float32 as native's CUDA kernel computes it:
  'none': x * 0.5 * (1 + erf(x / sqrt(2)))
  'tanh': 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), written as x * sigmoid(2 * inner)
          (the same value: 1 + tanh(u) = 2 / (1 + exp(-2u)); no cancellation where tanh is near -1).

A dense input is read as the flat block it is and the result gets its strides, as native's; any
other layout is made contiguous first.
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
def _gelu_kernel(x_ptr, out_ptr, n, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    if TANH:
        inner = 0.7978845608028654 * (x + 0.044715 * (x * x * x))
        y = x / (1.0 + tl.exp(-2.0 * inner))
    else:
        y = x * 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, y, mask=mask)


def dense(t):
    """Whether t's elements fill its memory exactly (non-overlapping and dense): empty_like(t) then has
    t's strides, and element k of the one's memory is element k of the other's."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def gelu(x, approximate="none"):
    """The launch path, for any tensor Triton can address (CPU ones under TRITON_INTERPRET=1)."""
    if approximate not in ("none", "tanh"):
        raise Decline(f"approximate={approximate!r} (native knows 'none' and 'tanh')")
    src = x if dense(x) else x.contiguous()
    out = torch.empty_like(src)
    n = src.numel()
    if n:
        _gelu_kernel[(triton.cdiv(n, BLOCK),)](src, out, n, TANH=approximate == "tanh", BLOCK=BLOCK)
    return out


def gelu__default_kernel_impl(self, *, approximate="none"):
    if not self.is_cuda:
        raise Decline("CUDA tensors only")
    if self.dtype not in FLOATS:
        raise Decline("float32, float16 and bfloat16 only")
    with torch.cuda.device(self.device):
        return gelu(self, approximate)
