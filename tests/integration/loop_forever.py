"""Runs a tiny op in a loop until killed; prints "ready" once it has run for a while."""
import sys

import torch

a = torch.ones(5, 7)
for i in range(2000):
    torch.mul(a, a)
print("ready", flush=True)
handled = "--catch-sigint" in sys.argv
try:
    while True:
        torch.mul(a, a)
except KeyboardInterrupt:
    if not handled:
        raise
    torch.add(a, a)  # work done after the interrupt, before a normal exit
    print("interrupted", flush=True)
