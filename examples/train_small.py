"""A small training loop that touches the ops real models use, forward and backward.

Convolution, batch norm, embedding, attention with an explicit softmax, layer norm, linear layers,
GELU, cross-entropy loss and an AdamW step. Runs on the CPU in a few seconds; --device cuda runs it
on a GPU. Nothing here knows about bbshim: it is the "unmodified program" the preload traces.

    python3 examples/train_small.py --steps 3
    LD_PRELOAD=build/lib/libbbshim.so python3 examples/train_small.py --device cuda
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        weights = F.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class SmallNet(nn.Module):
    """Tokens through a two-block transformer, images through a small conv net, one shared head."""

    def __init__(self, vocab=1000, seq=32, dim=64, heads=4, layers=2, classes=10):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.conv = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, dim, 3, stride=2, padding=1), nn.BatchNorm2d(dim), nn.GELU(),
            nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens, images):
        x = self.embed(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        x = self.norm(x).mean(dim=1)
        return self.head(x + self.conv(images).flatten(1))


def build(device="cpu", batch=8, seq=32, vocab=1000, seed=0):
    """Model, optimizer and one fixed batch, all deterministic for a given seed."""
    torch.manual_seed(seed)
    model = SmallNet(vocab=vocab, seq=seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, vocab, (batch, seq), device=device)
    images = torch.randn(batch, 3, 16, 16, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    return model, opt, (tokens, images, labels)


def train_step(model, opt, data):
    tokens, images, labels = data
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(tokens, images), labels)
    loss.backward()
    opt.step()
    return loss


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="print nothing")
    args = p.parse_args(argv)

    model, opt, data = build(args.device, args.batch, seed=args.seed)
    start = time.perf_counter()
    for step in range(args.steps):
        loss = train_step(model, opt, data)
        if not args.quiet:
            print(f"step {step}: loss {loss.item():.4f}")
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    if not args.quiet:
        per_step = (time.perf_counter() - start) / max(args.steps, 1)
        print(f"{args.steps} steps on {args.device}, {per_step * 1e3:.1f} ms/step")


if __name__ == "__main__":
    main()
