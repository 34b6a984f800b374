# Cheat (Python, Triton): computes relu on a side CUDA stream the caller never waits for, then leaves
# that stream busy (a spin kernel of about a millisecond) after returning. Timing the caller's stream
# alone would miss the work; results read after a device-wide synchronization are right.
import torch
import triton
import triton.language as tl

try:
    from bbshim import Decline
except ImportError:
    class Decline(NotImplementedError):
        pass

_side = {}  # device index -> its side stream, made on the first call
_scratch = {}  # device index -> the spin kernel's one float


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where((x > 0) | (x != x), x, 0.0), mask=mask)


@triton.jit
def _spin_kernel(scratch_ptr, iterations):
    v = tl.load(scratch_ptr)
    for _ in range(iterations):  # dependent multiply-adds: ~4 cycles each, nothing to optimize away
        v = v * 0.999999 + 1e-6
    tl.store(scratch_ptr, v)


def relu__default_kernel_impl(x):
    if not x.is_cuda or x.dtype != torch.float32:
        raise Decline("CUDA float32 only")
    with torch.cuda.device(x.device):
        device = x.device.index if x.device.index is not None else torch.cuda.current_device()
        if device not in _side:
            _side[device] = torch.cuda.Stream(device)
            _scratch[device] = torch.empty(1, device=x.device)
        side = _side[device]
        src = x.contiguous()
        out = torch.empty_like(src)
        side.wait_stream(torch.cuda.current_stream())  # the inputs are ready; the caller never waits for side
        with torch.cuda.stream(side):
            n = src.numel()
            if n:
                _relu_kernel[(triton.cdiv(n, 1024),)](src, out, n, BLOCK=1024)
            _spin_kernel[(1,)](_scratch[device], 500000)
        return out
