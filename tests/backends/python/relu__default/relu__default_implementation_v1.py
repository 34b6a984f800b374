import numpy as np
import torch


def relu__default_kernel_impl(x):
    return torch.from_numpy(np.maximum(x.detach().contiguous().numpy(), 0))
