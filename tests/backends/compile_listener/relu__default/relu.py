"""A right relu that stands in for a Triton kernel's first calls: on each new shape it takes 0.2 s and
reports one compile of 0.2 s to Triton's compile listener (`triton.knobs.compilation.listener`, made here
as a stand-in module where Triton is not imported), which bbshim's bridge installs. bbreplay must charge
that time to "kernel import and compile", not to "kernel runs", and keep calling the listener that was
there before (integration.python_kernels)."""
import sys
import time
import types

import numpy as np
import torch

import bbshim

if "triton" not in sys.modules:  # (the bridge looks for Triton after this file's import)
    sys.modules["triton"] = types.SimpleNamespace(
        knobs=types.SimpleNamespace(compilation=types.SimpleNamespace(listener=None)))
_earlier = {"calls": 0}


def _earlier_listener(**kwargs):
    _earlier["calls"] += 1


sys.modules["triton"].knobs.compilation.listener = _earlier_listener
_compiled = set()


class _Times:  # (Triton's CompileTimes: microseconds)
    total = 200_000


@bbshim.kernel("aten::relu")
def relu(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _compiled:
        _compiled.add(key)
        time.sleep(0.2)
        calls = _earlier["calls"]
        sys.modules["triton"].knobs.compilation.listener(src=None, metadata={}, metadata_group={}, times=_Times(),
                                                         cache_hit=False)
        if _earlier["calls"] != calls + 1:
            raise RuntimeError("the listener set before bbshim's was not called")
    return torch.from_numpy(np.maximum(x.detach().contiguous().numpy(), 0))
