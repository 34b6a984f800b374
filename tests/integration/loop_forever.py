"""Runs a tiny op in a loop until killed; prints "ready" once it has run for a while."""
import sys

import torch

a = torch.ones(5, 7)
for i in range(2000):
    torch.mul(a, a)
handled = "--catch-sigint" in sys.argv
try:
    print("ready", flush=True)  # inside the try: a ^C sent on "ready" always lands in it
    while True:
        torch.mul(a, a)
except KeyboardInterrupt:
    if not handled:
        raise
    torch.add(a, a)  # work done after the interrupt, before a normal exit
    print("interrupted", flush=True)
