"""aten::gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor in Triton
(BackendBench's layout): grad_output * gelu'(self), in float32 as native's CUDA kernel computes it:
  'none': cdf + x * pdf, cdf = 0.5 * (1 + erf(x / sqrt(2))), pdf = exp(-x^2 / 2) / sqrt(2 pi)
  'tanh': 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2 / pi) * (1 + 3 * 0.044715 * x^2),
          t = tanh(u), u = sqrt(2 / pi) * (x + 0.044715 * x^3); with s = sigmoid(2u) and
          s' = sigmoid(-2u): 0.5 * (1 + t) = s and 1 - t^2 = 4 s s' (the same values, without the
          cancellation of 1 - t^2 where |t| is near 1).

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
def _gelu_backward_kernel(g_ptr, x_ptr, out_ptr, n, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    if TANH:
        k_beta = 0.7978845608028654  # sqrt(2 / pi)
        k_kappa = 0.044715
        x_sq = x * x
        inner = k_beta * (x + k_kappa * (x_sq * x))
        s = 1.0 / (1.0 + tl.exp(-2.0 * inner))  # 0.5 * (1 + tanh(inner))
        s_neg = 1.0 / (1.0 + tl.exp(2.0 * inner))  # 0.5 * (1 - tanh(inner))
        right = 0.5 * x * (4.0 * s * s_neg) * k_beta * (1.0 + 3.0 * k_kappa * x_sq)
        d = s + right
    else:
        cdf = 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))
        pdf = tl.exp(-0.5 * x * x) * 0.3989422804014327  # 1 / sqrt(2 pi)
        d = cdf + x * pdf
    tl.store(out_ptr + offs, g * d, mask=mask)


def dense(t):
    """Whether t's elements fill its memory exactly (non-overlapping and dense): empty_like(t) then has
    t's strides, and element k of the one's memory is element k of the other's."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def gelu_backward(grad, x, approximate="none"):
    """The launch path, for any tensors Triton can address (CPU ones under TRITON_INTERPRET=1)."""
    if approximate not in ("none", "tanh"):
        raise Decline(f"approximate={approximate!r} (native knows 'none' and 'tanh')")
    if grad.stride() != x.stride() or not dense(x):
        grad, x = grad.contiguous(), x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _gelu_backward_kernel[(triton.cdiv(n, BLOCK),)](grad, x, out, n, TANH=approximate == "tanh", BLOCK=BLOCK)
    return out


def gelu_backward__default_kernel_impl(grad_output, self, *, approximate="none"):
    if not self.is_cuda or grad_output.device != self.device:
        raise Decline("CUDA tensors on one device only")
    if grad_output.shape != self.shape or grad_output.dtype != self.dtype:
        raise Decline("broadcasting and mixed dtypes not handled")
    if self.dtype not in FLOATS:
        raise Decline("float32, float16 and bfloat16 only")
    with torch.cuda.device(self.device):
        return gelu_backward(grad_output, self, approximate)
