import numpy as np
import torch

import bbshim


@bbshim.kernel("aten::mul.Tensor")
def mul(a, b):
    if a.dtype != torch.float32 or b.dtype != torch.float32 or a.shape != b.shape:
        raise bbshim.Decline("same-shape float32 only")
    return torch.from_numpy(a.detach().contiguous().numpy() * b.detach().contiguous().numpy())
