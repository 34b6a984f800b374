"""aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
float eps) -> (Tensor, Tensor, Tensor) in Triton (BackendBench's layout): one program per normalized
row, two-pass mean and biased variance in float32, out = (x - mean) * rstd * weight + bias. Returns
what native's CUDA kernel returns: the output (contiguous, the input's dtype), the mean and
rstd = 1/sqrt(var + eps) in float32 (the accumulation type: float32 for float16/bfloat16 input too),
shaped like the input's leading dims followed by a 1 per normalized dim. A row holding inf or NaN has
NaN statistics (as native's Welford gives them). Rows of up to 8192 elements stay in registers;
longer ones are read three times.
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
MAX_SINGLE = 8192  # the longest row held in registers at once
LOOP_BLOCK = 2048


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps, HAS_W: tl.constexpr,
                       HAS_B: tl.constexpr, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt_rn(tl.sum(d * d, axis=0) / N + eps)
        y = d * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, y, mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            idx = start + cols
            acc += tl.load(x_row + idx, mask=idx < N, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / N
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            idx = start + cols
            x = tl.load(x_row + idx, mask=idx < N, other=0.0).to(tl.float32)
            d = tl.where(idx < N, x - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt_rn(tl.sum(acc, axis=0) / N + eps)
        for start in range(0, N, BLOCK):
            idx = start + cols
            mask = idx < N
            y = (tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32) - mean) * rstd
            if HAS_W:
                y = y * tl.load(w_ptr + idx, mask=mask, other=0.0).to(tl.float32)
            if HAS_B:
                y = y + tl.load(b_ptr + idx, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + idx, y, mask=mask)
    tl.store(mean_ptr + row, tl.where(rstd != rstd, float("nan"), mean))
    tl.store(rstd_ptr + row, rstd)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The launch path, for any tensors Triton can address (CPU ones under TRITON_INTERPRET=1)."""
    axis = x.dim() - len(normalized_shape)
    n = 1
    for s in normalized_shape:
        n *= s
    m = 1
    for s in x.shape[:axis]:
        m *= s
    stat_shape = list(x.shape[:axis]) + [1] * len(normalized_shape)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    mean = torch.empty(stat_shape, dtype=torch.float32, device=x.device)
    rstd = torch.empty(stat_shape, dtype=torch.float32, device=x.device)
    if m == 0:
        return y, mean, rstd
    if n == 0:
        raise Decline("an empty normalized shape")
    src = x.contiguous()
    w = weight.contiguous() if weight is not None else src  # (src: a pointer the kernel never reads)
    b = bias.contiguous() if bias is not None else src
    single = n <= MAX_SINGLE
    block = max(16, triton.next_power_of_2(n)) if single else LOOP_BLOCK
    warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
    _layer_norm_kernel[(m,)](src, w, b, y, mean, rstd, n, float(eps), HAS_W=weight is not None,
                             HAS_B=bias is not None, BLOCK=block, SINGLE=single, num_warps=warps)
    return y, mean, rstd


def native_layer_norm__default_kernel_impl(input, normalized_shape, weight, bias, eps):
    if not input.is_cuda:
        raise Decline("CUDA tensors only")
    if input.dtype not in FLOATS:
        raise Decline("float32, float16 and bfloat16 only")
    shape = list(normalized_shape)
    if not shape:
        raise Decline("an empty normalized_shape (native raises)")
    if input.dim() < len(shape) or list(input.shape[input.dim() - len(shape):]) != shape:
        raise Decline("normalized_shape is not the input's last dims (native raises)")
    for t in (weight, bias):
        if t is not None and (t.dtype != input.dtype or t.device != input.device or list(t.shape) != shape):
            raise Decline("weight and bias of the input's dtype and device, shaped normalized_shape, only")
    with torch.cuda.device(input.device):
        return layer_norm(input, shape, weight, bias, eps)
