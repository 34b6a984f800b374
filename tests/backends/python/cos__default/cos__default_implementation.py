import numpy as np
import torch

print("importing the cos kernel")


def cos__default_kernel_impl(x):
    return torch.from_numpy(np.cos(x.detach().contiguous().numpy()))
