#!/usr/bin/env python3
"""What tracing costs a training step, counted in instructions: deterministic where a shared machine's
timings are not (the development VM's move by ±20%, the H200 host's step by ±30% between processes).

Each configuration runs a CPU training step (bench_overhead.py's models, one intra-op thread) under
valgrind's callgrind twice, for SHORT and LONG steps (--steps SHORT,LONG); the difference of the two
runs' totals over LONG - SHORT steps is one step's instructions with start-up, the first steps' first
sights and the exit taken out (SHORT must pass the steps that still make new signatures):
  none         no preload
  rf-floor     no preload; one empty RecordFunction callback that asks for every op's inputs
               (build/lib/libbb_bench_rf_floor.so): what any tracer that sees every call with its
               arguments pays PyTorch before doing anything
  shapes-only  the preload tracing (BB_DEVICE_TIME=0 BB_FLUSH_SECONDS=0: no periodic rewrite inside
               the steps)
It prints a step's instructions in each, RecordFunction's floor (rf-floor - none) and bbshim's own
work (shapes-only - rf-floor), also per traced call (the calls a step, from shapes-only's two traces).
valgrind must be installed (Debian: valgrind); --model llama-tiny needs transformers. A run of the
tiny Llama takes 4-10 minutes under callgrind; --jobs runs that many at once.

    python3 scripts/tracer_instructions.py --model llama-tiny --jobs 2
    python3 scripts/tracer_instructions.py --configs rf-floor,shapes-only --json out.json
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["none", "rf-floor", "shapes-only"]


def worker(args):
    """In the process callgrind runs: the step, args.worker_steps times."""
    import torch
    torch.set_num_threads(1)
    if args.config == "rf-floor":
        import ctypes
        ctypes.CDLL(str(Path(args.build) / "lib" / "libbb_bench_rf_floor.so"))
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_overhead
    step = bench_overhead.make_step(args.model, "cpu", args.batch, 0)
    for _ in range(args.worker_steps):
        step()


def callgrind_total(out_file):
    """The `totals:` (or `summary:`) line of a callgrind output file: instructions executed."""
    text = Path(out_file).read_text(errors="replace")
    m = re.search(r"^totals:\s+(\d+)", text, re.M) or re.search(r"^summary:\s+(\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"{out_file}: no totals line (callgrind's output format changed?)")
    return int(m.group(1))


def trace_calls(path):
    """meta.calls of a bbshim trace (the calls traced in the whole run) and its number of signatures."""
    text = Path(path).read_text()
    m = re.search(r"^  calls:\s+(\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"{path}: no meta.calls")
    return int(m.group(1)), len(re.findall(r"^  - op: ", text, re.M))


def run_one(args, config, steps, tmp):
    """One process under callgrind: its instructions, and with the preload (calls traced, signatures)."""
    out = Path(tmp) / f"{config}-{steps}.callgrind"
    trace = Path(tmp) / f"{config}-{steps}.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_") and k != "LD_PRELOAD"}
    env["OMP_NUM_THREADS"] = "1"
    if config == "shapes-only":
        env.update(LD_PRELOAD=str(Path(args.build) / "lib" / "libbbshim.so"), BB_DEVICE_TIME="0",
                   BB_FLUSH_SECONDS="0", BB_TRACE=str(trace))
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
           "--worker", config, "--worker-steps", str(steps), "--model", args.model, "--build", args.build,
           "--batch", str(args.batch)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{config}, {steps} steps: exit {p.returncode}\n{p.stderr[-3000:]}")
    return callgrind_total(out), (trace_calls(trace) if config == "shapes-only" else None)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--model", default="llama-tiny", choices=["llama-tiny", "small"],
                   help="bench_overhead.py's CPU models: llama-tiny (default; hidden 64, its ops cost about "
                   "what launches do) or small (the example model)")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {','.join(CONFIGS)}")
    p.add_argument("--steps", default="18,28", help="SHORT,LONG: the steps of the two runs (default 18,28)")
    p.add_argument("--batch", type=int, default=8, help="the example model's batch (--model small)")
    p.add_argument("--jobs", type=int, default=2, help="callgrind runs at once (default 2)")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-steps", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.config = args.worker
    if args.worker:
        return worker(args)
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        p.error(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    try:
        short, long_ = (int(x) for x in args.steps.split(","))
    except ValueError:
        p.error(f"--steps {args.steps!r}: expected SHORT,LONG, two whole numbers")
    if not 0 <= short < long_:
        p.error(f"--steps {args.steps!r}: expected 0 <= SHORT < LONG")
    if not shutil.which("valgrind"):
        sys.exit("tracer_instructions: valgrind not found (Debian: apt-get install valgrind)")
    for c, lib in (("rf-floor", "libbb_bench_rf_floor.so"), ("shapes-only", "libbbshim.so")):
        if c in configs and not (Path(args.build) / "lib" / lib).exists():
            sys.exit(f"tracer_instructions: {Path(args.build) / 'lib' / lib} not found: build first "
                     "(scripts/setup.sh), or say where with --build")

    with tempfile.TemporaryDirectory(prefix="bb-instr-") as tmp:
        runs = [(c, n) for c in configs for n in (short, long_)]
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = {r: pool.submit(run_one, args, r[0], r[1], tmp) for r in runs}
            results = {}
            for r, f in futures.items():
                try:
                    results[r] = f.result()
                except RuntimeError as e:
                    sys.exit(f"tracer_instructions: {e}")
    span = long_ - short
    per_step = {c: (results[(c, long_)][0] - results[(c, short)][0]) / span for c in configs}
    calls = None
    if "shapes-only" in configs:
        (calls_short, sigs_short), (calls_long, sigs_long) = (results[("shapes-only", n)][1] for n in (short, long_))
        calls = (calls_long - calls_short) / span
        if sigs_long != sigs_short:
            print(f"warning: steps {short + 1}-{long_} made {sigs_long - sigs_short} new signatures: their first "
                  "sights (the slow path) are in the figures below; a larger SHORT leaves them out", file=sys.stderr)

    print(f"model: {args.model} (CPU, 1 thread); steps {short + 1}-{long_} ({span} steps) as the difference "
          f"of a {short}- and a {long_}-step run under callgrind")
    print(f"{'config':<14}{'instructions/step':>20}")
    for c in configs:
        print(f"{c:<14}{per_step[c] / 1e6:>18.2f} M")
    out = {"model": args.model, "steps": [short, long_], "instructions_per_step": per_step,
           "traced_calls_per_step": calls}
    if "none" in per_step and "rf-floor" in per_step:
        floor = per_step["rf-floor"] - per_step["none"]
        out["recordfunction_floor"] = floor
        print(f"RecordFunction with inputs (rf-floor - none): {floor / 1e6:+.2f} M a step"
              + (f", {floor / calls:.0f} a call" if calls else ""))
    if "rf-floor" in per_step and "shapes-only" in per_step:
        own = per_step["shapes-only"] - per_step["rf-floor"]
        out["bbshim_own"] = own
        print(f"bbshim's own tracing (shapes-only - rf-floor): {own / 1e6:+.2f} M a step, "
              f"{own / calls:.0f} a call at {calls:.0f} traced calls a step")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
