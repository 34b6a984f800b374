# Honest (Python, BackendBench layout): imports a few standard and third-party modules the first time
# it is called (as a kernel that loads its helpers lazily would), then computes relu with numpy. It
# must pass, unflagged, and be timed.
import torch

_np = None


def _helpers():
    global _np
    if _np is None:
        import decimal  # noqa: F401  (lazily imported modules: only the import itself matters here)
        import fractions  # noqa: F401
        import json  # noqa: F401
        import statistics  # noqa: F401
        import numpy
        _np = numpy
    return _np


def relu__default_kernel_impl(x):
    np = _helpers()
    if x.dtype != torch.float32 or x.device.type != "cpu":
        raise NotImplementedError("CPU float32 only")
    return torch.from_numpy(np.maximum(x.detach().contiguous().numpy(), np.float32(0)))
