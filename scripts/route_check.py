#!/usr/bin/env python3
"""Does a training run give the same losses with its ops routed to a generated backend?

Trains the same model three times in fresh processes — natively, with the backend routed through the
preload, and in shadow mode (native results, generated kernels run beside them and compared) — and
compares the losses step by step. Prints the routing and shadow summaries and one verdict line;
exits 1 when the losses diverge beyond --rtol or nothing was routed.

    python3 scripts/route_check.py                                   # CPU, example model, cpu_reference
    python3 scripts/route_check.py --device cuda --model gpt2 --steps 20   # GPU host, cuda_example
    python3 scripts/route_check.py --device cuda --model llama --backend DIR  # the small Llama
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def train(args):
    """Worker: prints one loss per line."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from bench_overhead import make_step
    torch.manual_seed(0)
    step = make_step(args.model, args.device, args.batch, args.seq)
    for _ in range(args.steps):
        print(f"{step().item():.9g}", flush=True)


def run(args, env_extra, label):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_") and k != "LD_PRELOAD"}
    env.update(env_extra)
    cmd = [sys.executable, __file__, "--worker", "--device", args.device, "--model", args.model,
           "--steps", str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{label} run failed ({r.returncode}):\n{r.stderr}")
    return [float(x) for x in r.stdout.split()], r.stderr


def shadow_policy(backend, path):
    ops = []
    for folder in sorted(Path(backend).iterdir()):
        m = re.fullmatch(r"(.+)__(\w+)", folder.name)
        if folder.is_dir() and m:
            ops.append("aten::" + m.group(1) + ("" if m.group(2) == "default" else "." + m.group(2)))
    lines = ["version: 1", "default:", "  mode: shadow",
             "  tolerance: {float32: {rtol: 1.0e-4, atol: 1.0e-5}, float64: {rtol: 1.0e-9, atol: 1.0e-12}}", "ops:"]
    lines += [f"  {op}: {{}}" for op in ops]
    Path(path).write_text("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model", default="small", choices=["small", "gpt2", "llama"],
                   help="llama: replay_throughput.py's small Llama, bf16 autocast on CUDA, at its own batch 4 x 512")
    p.add_argument("--backend", help="backend folder (default: the sample backend for the device)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256, help="sequence length for gpt2")
    p.add_argument("--rtol", type=float, default=1e-3, help="largest relative loss difference accepted")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return train(args)
    if args.steps < 1:
        p.error("--steps must be at least 1: there is nothing to compare otherwise")
    backend = args.backend or str(ROOT / "backends" / ("cuda_example" if args.device == "cuda" else "cpu_reference"))
    preload = {"LD_PRELOAD": str(Path(args.build) / "lib" / "libbbshim.so"), "BB_TRACE": "off"}
    with tempfile.TemporaryDirectory() as tmp:
        policy = os.path.join(tmp, "shadow.yaml")
        shadow_policy(backend, policy)
        native, _ = run(args, {}, "native")
        routed, routed_err = run(args, dict(preload, BB_BACKEND=backend), "routed")
        shadowed, shadow_err = run(args, dict(preload, BB_BACKEND=backend, BB_POLICY=policy), "shadow")
    print(f"{args.model} on {args.device}, {args.steps} steps, backend {backend}")
    print(f"{'step':>4} {'native':>14} {'routed':>14} {'rel diff':>10} {'shadow':>14}")
    rel = lambda a, b: abs(a - b) / max(abs(b), 1e-12)  # noqa: E731
    worst = max((rel(r, n) for r, n in zip(routed, native)), default=0.0)
    # The shadow run continues with native results: it differs from the native run only where native
    # kernels themselves are not deterministic (some CUDA backward kernels).
    worst_shadow = max((rel(s, n) for s, n in zip(shadowed, native)), default=0.0)
    for i, (n, r, s) in enumerate(zip(native, routed, shadowed)):
        print(f"{i:>4} {n:>14.7f} {r:>14.7f} {rel(r, n):>10.2e} {s:>14.7f}")
    print("\n-- routed run\n" + routed_err.strip())
    print("\n-- shadow run\n" + shadow_err.strip())
    routed_any = bool(re.search(r"^\s+aten::\S+\s+route\s+\d+\s+[1-9]", routed_err, re.M))
    # zip() above stops at the shortest list: every run must have printed one loss per step.
    complete = len(routed) == len(native) == len(shadowed) == args.steps
    ok = worst <= args.rtol and worst_shadow <= args.rtol and routed_any and complete
    print(f"\nverdict: {'PASS' if ok else 'FAIL'}: largest relative loss difference routed {worst:.2e}, "
          f"shadow {worst_shadow:.2e} (limit {args.rtol:g}); calls routed: {'yes' if routed_any else 'NO'}; "
          f"losses native/routed/shadow {len(native)}/{len(routed)}/{len(shadowed)} of {args.steps}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
