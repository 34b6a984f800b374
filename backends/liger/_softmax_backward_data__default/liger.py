"""aten::_softmax_backward_data -> Liger-Kernel's _softmax_backward (liger_kernel.ops.softmax). Liger's backward
takes the block settings its forward chose; they depend only on the row length, so they are chosen again here
with Liger's own rule (liger_kernel.ops.utils.calculate_settings, as _softmax_forward calls it).

Declines as the forward does (_softmax__default/liger.py), and when the input's dtype differs from the
gradient's (native's float32 gradient of a half softmax)."""
import bbshim
import torch

_softmax_backward = bbshim.import_from("liger-kernel", "0.8.5", "liger_kernel.ops.softmax", "_softmax_backward")
calculate_settings = bbshim.import_from("liger-kernel", "0.8.5", "liger_kernel.ops.utils", "calculate_settings")

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@bbshim.kernel("aten::_softmax_backward_data")
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    if not grad_output.is_cuda:
        raise bbshim.Decline("CUDA tensors only")
    if output.dim() == 0 or dim % output.dim() != output.dim() - 1:
        raise bbshim.Decline("softmax over the last dimension only")
    if grad_output.dtype not in FLOATS or output.dtype != grad_output.dtype or input_dtype != grad_output.dtype:
        raise bbshim.Decline("float32, float16 or bfloat16, one dtype for gradient, output and input")
    if grad_output.numel() == 0 or output.shape[-1] > 65536:
        raise bbshim.Decline("rows of 1 to 65536 elements")
    block, warps = calculate_settings(output.shape[-1])
    with torch.cuda.device(grad_output.device):
        return _softmax_backward(grad_output, output, block, warps, False)
