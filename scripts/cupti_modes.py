#!/usr/bin/env python3
"""Which way of tying kernels to ops works with this CUDA/CUPTI, and what each costs.

For each BB_CUPTI_MODE (callback, external-all, kernels-only) a preloaded run of a small CUDA program
reports whether its kernels were attributed (trace and timeline), and a tight loop of a tiny CUDA op
(torch.add on 1-element tensors) measures the cost per op against no preload and against tracing
without device timing (BB_DEVICE_TIME=0).

    python3 scripts/cupti_modes.py [--build build]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORK = """
import sys, time, torch
x = torch.randn(256, 256, device="cuda")
for _ in range(10):
    torch.relu(torch.mm(x, x))
a = torch.ones(1, device="cuda"); b = torch.ones(1, device="cuda")
best = 1e9
for _ in range(5):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(20000):
        torch.add(a, b)
    torch.cuda.synchronize(); best = min(best, (time.perf_counter() - t0) / 20000 * 1e6)
print(best)
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=str(ROOT / "build"))
    args = p.parse_args()
    import yaml
    base = {k: v for k, v in os.environ.items() if not k.startswith("BB_") and k != "LD_PRELOAD"}
    pre = str(Path(args.build) / "lib" / "libbbshim.so")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("none", {}), ("shapes-only", {"LD_PRELOAD": pre, "BB_DEVICE_TIME": "0"})]
        runs += [(m, {"LD_PRELOAD": pre, "BB_CUPTI_MODE": m, "BB_DEVICE_TIME": "all"})
                 for m in ("callback", "external-all", "kernels-only")]
        for name, extra in runs:
            trace, tl = Path(tmp) / f"{name}.yaml", Path(tmp) / f"{name}.json"
            env = dict(base, BB_TRACE=str(trace), **extra)
            r = subprocess.run([sys.executable, "-c", WORK], env=env, capture_output=True, text=True)
            line = f"{name:<13} rc {r.returncode}  tiny op {float(r.stdout.split()[-1]) if r.returncode == 0 else -1:.2f} us"
            if r.stderr.strip():
                line += f"  stderr: {r.stderr.strip()[:300]}"
            print(line)
            if name in ("none", "shapes-only") or r.returncode:
                continue
            t = yaml.safe_load(trace.read_text())
            timed = {e["op"]: e["device_time"]["calls"] for e in t["ops"] if "device_time" in e}
            print(f"    device_timing: {json.dumps(t['meta'].get('device_timing'))[:400]}")
            print(f"    ops timed: {json.dumps(timed)[:400]}")
            r = subprocess.run([sys.executable, "-c", WORK], env=dict(env, BB_TIMELINE=str(tl)), capture_output=True,
                               text=True)
            if r.returncode == 0 and tl.exists():
                ev = json.loads(tl.read_text())["traceEvents"]
                cats = Counter(e.get("cat", e.get("ph")) for e in ev)
                linked = sum(1 for e in ev if e.get("cat") == "kernel" and e["args"].get("External id"))
                print(f"    timeline: {dict(cats)}; kernels with an op: {linked}")


if __name__ == "__main__":
    main()
