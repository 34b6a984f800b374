import numpy as np
import torch


def add_kernel_impl(a, b, alpha=1):
    b = b.detach().contiguous().numpy() if isinstance(b, torch.Tensor) else b
    return torch.from_numpy(np.asarray(a.detach().contiguous().numpy() + alpha * b, dtype=np.float32))
