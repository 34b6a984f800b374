#!/usr/bin/env python3
"""What tracing costs, end to end, in one run.

For each configuration — no preload, preload with BB_DISABLE=1, preload tracing (with CUPTI device
timing on CUDA: the default), the same with sampled device timing (traced-sampled:
BB_DEVICE_TIME_SAMPLE=100/1000 unless --sample says otherwise: 100 ms of every second, CUPTI detached
in between), preload tracing with BB_DEVICE_TIME=0 (shapes-only), preload tracing with CUPTI recording
kernels but not tying them to ops (cupti-kernels: what CUPTI itself costs),
torch.profiler(record_shapes=True) without the preload, and the preload routing aten::add.Tensor to the
sample backend under a policy whose condition is false for these calls (tracing off: the cost of
deciding not to route) — a fresh process measures:
  * per-op time of a tight loop of a tiny op (torch.add on 1-element tensors), best of several runs,
    each at least --op-seconds long (a whole number of sampling periods: a short run could fall
    between two windows of sampled timing and time nothing);
  * per-step time of a training step (the example model, or GPT-2 small with --model gpt2), median.
Configurations run interleaved, --rounds times, each round in fresh processes. Per-op time is the best
over rounds (noise only ever adds time to a tight loop); step time is the median over rounds.

    python3 scripts/bench_overhead.py                      # CPU, example model
    python3 scripts/bench_overhead.py --device cuda --model gpt2 --json out.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["none", "disabled", "traced", "traced-sampled", "shapes-only", "cupti-kernels", "profiler", "route-unmet"]
SAMPLE = "100/1000"
UNMET_POLICY = "version: 1\nops:\n  aten::add.Tensor:\n    when: {dtype: [float64]}\n"  # the loop adds float32


def add_loop_us(a, b, seconds, chunk=100):
    """Per-call time of torch.add(a, b) in a loop of at least `seconds`, device work included."""
    import torch
    sync = torch.cuda.synchronize if a.is_cuda else (lambda: None)
    sync()
    calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(chunk):
            torch.add(a, b)
        calls += chunk
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def tiny_op_us(device, seconds, reps):
    """Best per-call time over reps runs of the loop, each of at least `seconds`."""
    import torch
    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    return min(add_loop_us(a, b, seconds) for _ in range(reps))


def make_step(model, device, batch, seq):
    """A function that runs one training step and returns its loss."""
    import torch
    if model == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        net = GPT2LMHeadModel(GPT2Config()).to(device)  # GPT-2 small from its config, no weights
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        ids = torch.randint(0, net.config.vocab_size, (batch, seq), device=device)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = net(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            return loss
        return step
    sys.path.insert(0, str(ROOT / "examples"))
    import train_small
    net, opt, data = train_small.build(device, batch)
    return lambda: train_small.train_step(net, opt, data)


def step_ms(step, device, steps, warmup):
    import torch
    times = []
    for i in range(warmup + steps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def worker(args):
    """One configuration in this process; prints one JSON line."""
    import torch
    step = make_step(args.model, args.device, args.batch, args.seq)
    step()  # first call: lazy init, cuDNN/cuBLAS handles

    def measure():
        return (tiny_op_us(args.device, args.op_seconds, args.reps),
                step_ms(step, args.device, args.steps, args.warmup))

    if args.config == "profiler":
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        with profile(activities=acts, record_shapes=True):
            op_us, ms = measure()
    else:
        op_us, ms = measure()
    print(json.dumps({"config": args.config, "op_us": op_us, "step_ms": ms, "torch": torch.__version__}))


def run_config(args, config):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_") and k != "LD_PRELOAD"}
    if config in ("disabled", "traced", "traced-sampled", "shapes-only", "cupti-kernels", "route-unmet"):
        env["LD_PRELOAD"] = str(Path(args.build) / "lib" / "libbbshim.so")
        env["BB_TRACE"] = os.path.join(args.tmp, f"bench-{os.getpid()}.yaml")
    if config == "disabled":
        env["BB_DISABLE"] = "1"
    if config == "shapes-only":  # tracing without CUPTI device timing
        env["BB_DEVICE_TIME"] = "0"
    if config == "traced-sampled":
        env["BB_DEVICE_TIME_SAMPLE"] = args.sample
    if config == "cupti-kernels":  # CUPTI's kernel records without tying them to ops: CUPTI's own share
        env["BB_CUPTI_MODE"] = "kernels-only"
    if config == "route-unmet":
        policy = os.path.join(args.tmp, "unmet.yaml")
        Path(policy).write_text(UNMET_POLICY)
        backend = "cuda_example" if args.device == "cuda" else "cpu_reference"
        env.update(BB_TRACE="off", BB_POLICY=policy, BB_BACKEND=str(ROOT / "backends" / backend),
                   BB_SUMMARY=os.path.join(args.tmp, "summary.txt"))
    cmd = [sys.executable, __file__, "--worker", "--config", config] + args.passthrough
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{config} failed:\n{r.stderr}")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    trace = env.get("BB_TRACE", "off")
    if config.startswith("traced") and args.device == "cuda" and os.path.exists(trace):
        import yaml  # what device timing did: a run that timed nothing must not pass as cheap
        result["device_timing"] = yaml.safe_load(Path(trace).read_text())["meta"].get("device_timing")
        os.unlink(trace)
    return result


def describe_machine(device):
    import platform
    import torch
    if device == "cuda":
        return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu} ({os.cpu_count()} cores), torch {torch.__version__}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model", default="small", choices=["small", "gpt2"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512, help="sequence length for gpt2")
    p.add_argument("--op-seconds", type=float, default=1.0,
                   help="each tiny-op timing runs at least this long (keep it a multiple of the sampling period)")
    p.add_argument("--reps", type=int, default=5, help="tiny-op timings; the best counts")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--configs", default=",".join(CONFIGS), help="which configurations, comma-separated "
                   f"(default: all of {','.join(CONFIGS)}; none is always measured)")
    p.add_argument("--sample", default=SAMPLE, help=f"BB_DEVICE_TIME_SAMPLE of traced-sampled (default {SAMPLE})")
    p.add_argument("--cpus", help="run every configuration on these CPUs only (taskset's list form: 4-7 or 2,3)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--config", choices=CONFIGS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    configs = ["none"] + [c for c in args.configs.split(",") if c in CONFIGS and c != "none"]
    if args.cpus:  # the workers inherit it
        cpus = set()
        for part in args.cpus.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        os.sched_setaffinity(0, cpus)

    args.passthrough = ["--device", args.device, "--model", args.model, "--batch", str(args.batch),
                        "--seq", str(args.seq), "--op-seconds", str(args.op_seconds), "--reps", str(args.reps),
                        "--steps", str(args.steps), "--warmup", str(args.warmup)]
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        rounds = {c: [] for c in configs}
        for r in range(args.rounds):
            for c in configs:
                rounds[c].append(run_config(args, c))
                print(f"round {r + 1}/{args.rounds} {c}: {rounds[c][-1]['op_us']:.2f} us/op, "
                      f"{rounds[c][-1]['step_ms']:.2f} ms/step", file=sys.stderr)

    med = {c: {"op_us": min(x["op_us"] for x in rounds[c]),
               "op_us_median": statistics.median(x["op_us"] for x in rounds[c]),
               "step_ms": statistics.median(x["step_ms"] for x in rounds[c])} for c in configs}
    base = med["none"]
    model = "GPT-2 small" if args.model == "gpt2" else "examples/train_small.py"
    model += f", batch {args.batch}" + (f", seq {args.seq}" if args.model == "gpt2" else "")
    print(f"machine: {describe_machine(args.device)}; date {time.strftime('%Y-%m-%d')}"
          + (f"; CPUs {args.cpus}" if args.cpus else ""))
    print(f"tiny op: torch.add on 1-element {args.device} tensors, best of {args.reps} x {args.op_seconds} s per "
          f"process, best over {args.rounds} rounds (median in brackets); step: {model}, median of "
          f"{args.steps} steps, median over rounds")
    print(f"{'config':<16}{'us/op':>8}{'(median)':>10}{'delta us':>10}{'ms/step':>10}{'step x':>8}")
    for c in configs:
        m = med[c]
        print(f"{c:<16}{m['op_us']:>8.2f}{'(' + format(m['op_us_median'], '.2f') + ')':>10}"
              f"{m['op_us'] - base['op_us']:>+10.2f}{m['step_ms']:>10.2f}{m['step_ms'] / base['step_ms']:>8.3f}")
    prof_cost = med["profiler"]["op_us"] - base["op_us"] if "profiler" in med else 0
    ours = med["traced"]["op_us"] - base["op_us"] if "traced" in med else 0
    if prof_cost > 0 and "traced" in med:
        print(f"tracing costs {ours / prof_cost:.2f}x the profiler's per-op overhead")
    if prof_cost > 0 and "traced-sampled" in med:
        sampled = med["traced-sampled"]["op_us"] - base["op_us"]
        print(f"tracing with sampled device timing ({args.sample} ms) costs {sampled / prof_cost:.2f}x the profiler's "
              f"per-op overhead")
        for x in rounds["traced-sampled"][-1:]:
            d = x.get("device_timing") or {}
            print(f"  last round's trace: status {d.get('status')}, {d.get('sampled')}, windows {d.get('windows')}, "
                  f"CUPTI detached between {d.get('detaches')} of them, calls timed {d.get('calls_timed')}, "
                  f"cut {d.get('cut_calls')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "model": args.model, "rounds": rounds, "median": med,
                       "machine": describe_machine(args.device)}, f, indent=1)


if __name__ == "__main__":
    main()
