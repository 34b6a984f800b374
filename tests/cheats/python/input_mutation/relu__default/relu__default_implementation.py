# Cheat (Python): computes relu in its input's memory and returns a copy: through numpy on the CPU, with a
# Triton kernel storing to both the input and the output on CUDA.
import numpy as np
import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU path needs no triton
    triton = None

if triton is not None:
    @triton.jit
    def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(x_ptr + offs, mask=mask)
        r = tl.where((v > 0) | (v != v), v, 0.0)
        tl.store(x_ptr + offs, r, mask=mask)  # the caller's input, overwritten
        tl.store(out_ptr + offs, r, mask=mask)


def relu__default_kernel_impl(x):
    if not x.is_cuda:
        a = x.detach().numpy()
        np.maximum(a, 0, out=a)
        return torch.from_numpy(a.copy())
    if not x.is_contiguous():
        raise NotImplementedError("contiguous inputs only")
    out = torch.empty_like(x)
    if x.numel():
        with torch.cuda.device(x.device):
            _relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
