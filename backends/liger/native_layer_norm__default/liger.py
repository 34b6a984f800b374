"""aten::native_layer_norm -> Liger-Kernel's layer_norm_forward (liger_kernel.ops.layer_norm), the Triton kernel
behind its LigerLayerNorm module: one program per row, float32 mean and rstd as native keeps them.

Declines (native runs): tensors not on CUDA; a normalized shape of more than the last dimension; no weight or
no bias (Liger's kernel reads both); dtypes other than float32, float16 and bfloat16, or weight and bias of
another dtype than the input; rows longer than Liger's largest block (65536); no elements."""
import bbshim
import torch

layer_norm_forward = bbshim.import_from("liger-kernel", "0.8.5", "liger_kernel.ops.layer_norm", "layer_norm_forward")

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@bbshim.kernel("aten::native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    if not input.is_cuda:
        raise bbshim.Decline("CUDA tensors only")
    if len(normalized_shape) != 1 or input.dim() == 0 or input.shape[-1] != normalized_shape[0]:
        raise bbshim.Decline("normalizes over the last dimension only")
    if weight is None or bias is None:
        raise bbshim.Decline("needs a weight and a bias")
    if input.dtype not in FLOATS or weight.dtype != input.dtype or bias.dtype != input.dtype:
        raise bbshim.Decline("float32, float16 or bfloat16, one dtype for input, weight and bias")
    if input.shape[-1] > 65536 or input.numel() == 0:
        raise bbshim.Decline("rows of 1 to 65536 elements")
    with torch.cuda.device(input.device):
        y, _, mean, rstd, _, _ = layer_norm_forward(input.contiguous(), weight.contiguous(), bias.contiguous(), eps)
    stats = (*input.shape[:-1], 1)  # (native's: the input's shape, 1 for the normalized dimension)
    return y, mean.view(stats), rstd.view(stats)
