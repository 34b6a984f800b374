"""aten::_softmax -> Liger-Kernel's _softmax_forward (liger_kernel.ops.softmax), the Triton kernel behind
LigerSoftmax: one program per row, the row in one block.

Declines (native runs): tensors not on CUDA; a dim other than the last; half_to_float (a float32 result of a
half input); dtypes other than float32, float16 and bfloat16; rows longer than Liger's largest block (65536;
its block settings refuse them); no elements."""
import bbshim
import torch

_softmax_forward = bbshim.import_from("liger-kernel", "0.8.5", "liger_kernel.ops.softmax", "_softmax_forward")

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@bbshim.kernel("aten::_softmax")
def _softmax(self, dim, half_to_float):
    if not self.is_cuda:
        raise bbshim.Decline("CUDA tensors only")
    if self.dim() == 0 or dim % self.dim() != self.dim() - 1:
        raise bbshim.Decline("softmax over the last dimension only")
    if half_to_float:
        raise bbshim.Decline("no float32 result of a half input (half_to_float)")
    if self.dtype not in FLOATS:
        raise bbshim.Decline("float32, float16 or bfloat16 only")
    if self.numel() == 0 or self.shape[-1] > 65536:
        raise bbshim.Decline("rows of 1 to 65536 elements")
    with torch.cuda.device(self.device):
        y, _, _, _ = _softmax_forward(self)
    return y
