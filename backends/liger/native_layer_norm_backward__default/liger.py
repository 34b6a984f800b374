"""aten::native_layer_norm_backward -> Liger-Kernel's layer_norm_backward (liger_kernel.ops.layer_norm): the input's
gradient and per-SM partial sums of the weight's and bias's, which Liger then sums with torch (`_DW.sum(0)`:
an ATen compute op that bbshim's native-call watch reports as such).

Declines as the forward does (native_layer_norm__default/liger.py), and when the input's gradient is not asked for
(Liger computes it always)."""
import bbshim
import torch

layer_norm_backward = bbshim.import_from("liger-kernel", "0.8.5", "liger_kernel.ops.layer_norm", "layer_norm_backward")

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@bbshim.kernel("aten::native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    if not input.is_cuda:
        raise bbshim.Decline("CUDA tensors only")
    if len(normalized_shape) != 1 or input.dim() == 0 or input.shape[-1] != normalized_shape[0]:
        raise bbshim.Decline("normalizes over the last dimension only")
    if weight is None or bias is None:
        raise bbshim.Decline("needs a weight and a bias")
    if input.dtype not in FLOATS or grad_out.dtype != input.dtype or weight.dtype != input.dtype \
            or bias.dtype != input.dtype:
        raise bbshim.Decline("float32, float16 or bfloat16, one dtype for gradient, input, weight and bias")
    if mean.dtype != torch.float32 or rstd.dtype != torch.float32:
        raise bbshim.Decline("float32 mean and rstd")
    if input.shape[-1] > 65536 or input.numel() == 0:
        raise bbshim.Decline("rows of 1 to 65536 elements")
    if not output_mask[0]:
        raise bbshim.Decline("Liger computes the input's gradient always")
    n = input.shape[-1]
    with torch.cuda.device(input.device):
        dx, dw, db = layer_norm_backward(grad_out.contiguous(), input.contiguous().view(-1, n), weight.contiguous(),
                                         bias.contiguous(), mean.contiguous().view(-1), rstd.contiguous().view(-1),
                                         needs_dw=bool(output_mask[1]), needs_db=bool(output_mask[2]))
    return dx, dw, db
