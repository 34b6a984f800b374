"""A stand-in for FlagGems (PyPI flag-gems) with its op table's form, for tests/integration/test_flaggems.py:
the real package imports only where there is a GPU. Its "kernels" work on CPU tensors through Python lists
(no ATen compute op, which the native-call watch would catch). Like the real one (flag_gems/utils/
code_cache.py), importing it makes a folder under the home directory, and fails where it cannot."""
import os
from pathlib import Path

import torch

_cache_dir = Path(os.environ.get("FLAGGEMS_CACHE_DIR") or Path.home() / ".flaggems")
_cache_dir.mkdir(parents=True, exist_ok=True)

__version__ = "5.0.2"
device = "cpu"


def relu(x):
    out = torch.empty_like(x)
    flat = out.view(-1)
    for i, v in enumerate(x.reshape(-1).tolist()):
        flat[i].fill_(max(v, 0.0))
    return out


def add(x, y, alpha=1):
    raise AssertionError("never called: its condition is false")


def neg(x):
    raise RuntimeError("fake FlagGems: neg is broken")


def not_an_op(x):
    return x


def zeros(*args, **kwargs):
    raise AssertionError("never written: a factory, which bbshim cannot route")


def linear(*args, **kwargs):
    raise AssertionError("never written: CompositeImplicitAutograd, which bbshim cannot route")


_FULL_CONFIG = (
    ("relu", relu),
    ("add.Tensor", add, lambda: False),
    ("neg", neg),
    ("no_such_op.default", not_an_op),
    ("zeros", zeros),
    ("linear", linear),
)
