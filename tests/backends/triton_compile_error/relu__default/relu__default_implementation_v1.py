"""aten::relu in Triton, with a block of 1000 elements: Triton's compiler refuses tl.arange(0, 1000) at
the first launch (a range must be a power of 2). Everything before the launch is an honest kernel's."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def relu__default_kernel_impl(self):
    src = self.contiguous()
    out = torch.empty_like(src)
    if src.numel():
        _relu_kernel[(triton.cdiv(src.numel(), 1000),)](src, out, src.numel(), BLOCK=1000)
    return out
