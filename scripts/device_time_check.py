#!/usr/bin/env python3
"""Device time per op: bbshim's CUPTI timing against torch.profiler's, on the same workload.

Runs the workload (the example model, or GPT-2 small built from its config) in two fresh processes on
CUDA: one preloaded with bbshim (tracing + device timing, the defaults), one under
torch.profiler(activities=[CPU, CUDA]) without the preload, the profiler covering the same span
(model build and all steps). Compares each op's self device time (the kernels, copies and sets the
op itself launched; torch.profiler's self_device_time_total) and the total.

    python3 scripts/device_time_check.py --model gpt2 --steps 10 --json out.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def worker(args):
    import torch
    from bench_overhead import make_step

    def work():
        # Parameters made on the GPU: no model upload, whose pageable copies take as long as the host
        # happens to let them (they varied by 20% between two otherwise identical runs).
        torch.set_default_device("cuda")
        step = make_step(args.model, "cuda", args.batch, args.seq)
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()

    if args.worker == "profiler":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            work()
        per_op = defaultdict(float)
        for e in p.key_averages():  # ATen ops only: not kernels' own rows, not user scopes
            if e.key.startswith("aten::") and e.self_device_time_total > 0:
                per_op[e.key] += e.self_device_time_total * 1000.0  # us -> ns
        print(json.dumps(per_op))
    else:
        work()
        print("{}")


def base_name(op):
    head, _, tail = op.partition("::")
    return head + "::" + tail.split(".")[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="small", choices=["small", "gpt2"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--json", help="also write the comparison here")
    p.add_argument("--worker", choices=["profiler", "bbshim"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    common = ["--model", args.model, "--steps", str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_") and k != "LD_PRELOAD"}
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "t.yaml"
        # Every call timed, as torch.profiler does: the comparison is of the times, call for call.
        ours_env = dict(env, LD_PRELOAD=str(Path(args.build) / "lib" / "libbbshim.so"), BB_TRACE=str(trace),
                        BB_DEVICE_TIME="all")
        a = subprocess.run([sys.executable, __file__, "--worker", "bbshim"] + common, env=ours_env,
                           capture_output=True, text=True)
        b = subprocess.run([sys.executable, __file__, "--worker", "profiler"] + common, env=env,
                           capture_output=True, text=True)
        if a.returncode or b.returncode:
            sys.exit(f"a run failed:\n{a.stderr}\n{b.stderr}")
        import yaml
        t = yaml.safe_load(trace.read_text())
    prof = json.loads(b.stdout.strip().splitlines()[-1])
    ours = defaultdict(float)
    for e in t["ops"]:
        if "device_time" in e:
            ours[base_name(e["op"])] += e["device_time"]["total_ns"]
    timing = t["meta"].get("device_timing", {})
    total_ours, total_prof = sum(ours.values()), sum(prof.values())
    import torch
    print(f"machine: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}")
    print(f"workload: {args.model}, {args.steps} steps, batch {args.batch}" +
          (f", seq {args.seq}" if args.model == "gpt2" else ""))
    print(f"bbshim timing: {timing.get('status')}; calls timed {timing.get('calls_timed')}, unattributed "
          f"{timing.get('unattributed')} ({timing.get('unattributed_ns', 0) / 1e6:.3f} ms), dropped "
          f"{timing.get('dropped_records')}, incomplete calls {timing.get('incomplete_calls')}")
    print(f"{'op (self device time)':<44}{'profiler ms':>13}{'bbshim ms':>12}{'diff %':>9}")
    rows = sorted(set(ours) | set(prof), key=lambda k: -max(ours.get(k, 0), prof.get(k, 0)))
    for k in rows[:25]:
        o, q = ours.get(k, 0.0), prof.get(k, 0.0)
        diff = (o - q) / q * 100 if q else float("inf")
        print(f"{k:<44}{q / 1e6:>13.3f}{o / 1e6:>12.3f}{diff:>+9.2f}")
    dev = (total_ours - total_prof) / total_prof * 100
    print(f"{'total':<44}{total_prof / 1e6:>13.3f}{total_ours / 1e6:>12.3f}{dev:>+9.2f}")
    print(f"total device time differs by {dev:+.2f}% (target: within 2%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"profiler_ns": prof, "bbshim_ns": ours, "total_diff_pct": dev, "timing": timing}, f, indent=1)
    return 0 if abs(dev) <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
