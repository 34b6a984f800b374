"""Writes TorchBench-format operator-input logs of a few small models, with an independent writer
(a TorchDispatchMode), to test bbshim's importer on logs it did not write itself.

    python3 torchbench_log.py OUT_DIR      # prints "<file> <total calls>" per model
"""
import os
import sys
from collections import Counter, defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import train_small  # noqa: E402

ABBR = {torch.bfloat16: "bf16", torch.float64: "f64", torch.float32: "f32", torch.float16: "f16",
        torch.complex64: "c64", torch.complex128: "c128", torch.int8: "i8", torch.int16: "i16",
        torch.int32: "i32", torch.int64: "i64", torch.bool: "b8", torch.uint8: "u8"}


def fmt(v):
    if isinstance(v, torch.Tensor):
        stride = "" if v.is_contiguous() else f", stride={tuple(v.stride())}"
        return f"T({list(v.shape)}, {ABBR.get(v.dtype, str(v.dtype))}{stride})"
    if isinstance(v, torch.dtype):
        return ABBR.get(v, str(v))
    if isinstance(v, torch.device):
        return repr(v.type)
    if isinstance(v, (torch.layout, torch.memory_format)):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {fmt(x)}" for k, x in v.items()) + "}"
    return repr(v)


class Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.db = defaultdict(Counter)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.db[str(func)][fmt((tuple(args), kwargs))] += 1
        return func(*args, **kwargs)

    def write(self, path):
        with open(path, "w") as f:
            for op in sorted(self.db):
                f.write(f"Operator: {op}\n")
                for inputs, n in self.db[op].items():
                    f.write(f"cnt: {n}, {inputs}\n")
        return sum(sum(c.values()) for c in self.db.values())


def example():
    model, opt, data = train_small.build("cpu", 4)
    for _ in range(2):
        train_small.train_step(model, opt, data)


def recurrent():
    torch.manual_seed(0)
    emb, lstm, head = nn.Embedding(50, 16), nn.LSTM(16, 32, batch_first=True), nn.Linear(32, 50)
    tokens = torch.randint(0, 50, (3, 7))
    out, _ = lstm(emb(tokens))
    logits = head(F.dropout(out, 0.1))
    loss = F.cross_entropy(logits.reshape(-1, 50), tokens.reshape(-1), ignore_index=0, label_smoothing=0.1)
    loss.backward()


def vision():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8, requires_grad=True).to(memory_format=torch.channels_last)
    y = nn.ConvTranspose2d(3, 4, 3, stride=2)(x)
    y = F.interpolate(y, size=(12, 12), mode="bilinear", align_corners=False)
    y = y.masked_fill(y > 1.5, float("-inf")).clamp(min=-3.0)
    y = torch.where(torch.isinf(y), torch.zeros_like(y), y)
    idx = torch.tensor([0, 2, 3])
    z = y.index_select(1, idx)[:, :, ::2].sum(dim=(2, 3), keepdim=True)
    z = z.to(torch.float64).mean()
    t = torch.zeros(5).index_put_((torch.tensor([1, 3]),), torch.tensor([2.0, 3.0]), accumulate=True)
    (z + t.sum()).backward()


def main():
    out = sys.argv[1]
    for name, fn in (("example", example), ("recurrent", recurrent), ("vision", vision)):
        log = Log()
        with log:
            fn()
        path = os.path.join(out, f"{name}_training.txt")
        print(path, log.write(path))


if __name__ == "__main__":
    main()
