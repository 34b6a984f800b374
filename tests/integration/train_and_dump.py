"""Trains the example for a few steps; prints each loss and saves the last step's gradients.

    python3 train_and_dump.py GRADS.pt [--steps N] [--device cuda]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

import torch  # noqa: E402

import train_small  # noqa: E402


def main():
    out = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 4
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    model, opt, data = train_small.build(device, 8)
    for _ in range(steps):
        print(f"{train_small.train_step(model, opt, data).item():.10f}")
    torch.save({n: p.grad.cpu() for n, p in model.named_parameters()}, out)


if __name__ == "__main__":
    main()
