# Cheat (Python, BackendBench layout): at import it registers a kernel of its own over ATen's CPU and
# CUDA relu (torch.library.Library("aten", "IMPL").impl), a correct one that busy-waits 200 us first,
# hoping that "native" measured in the same process is that slow relu; the library object is kept
# alive (the override lasts as long as it does). Its own relu is honest numpy. Native runs in another
# process, so the override slows nothing measured; expected: dispatcher-override.
import time

import numpy as np
import torch

_LIB = torch.library.Library("aten", "IMPL")


def _slow_relu(x):
    end = time.perf_counter() + 200e-6
    while time.perf_counter() < end:
        pass
    return torch.clamp_min(x, 0)


_LIB.impl("relu", _slow_relu, "CPU")
_LIB.impl("relu", _slow_relu, "CUDA")


def relu__default_kernel_impl(x):
    if x.is_cuda:  # by way of the host: the override is the point here, not this kernel's speed
        return torch.from_numpy(np.maximum(x.detach().cpu().numpy(), np.float32(0))).to(x.device)
    return torch.from_numpy(np.maximum(x.detach().contiguous().numpy(), np.float32(0)))
