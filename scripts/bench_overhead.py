#!/usr/bin/env python3
"""What tracing costs, end to end, in one run.

For each configuration — no preload, preload with BB_DISABLE=1, preload tracing with its default
CUPTI device timing on CUDA (traced: each signature's first calls timed, CUPTI detached while no
signature wants more), the same with every call timed (traced-all: BB_DEVICE_TIME=all), the same as
traced asked for by name (traced-first: BB_DEVICE_TIME=first), the same with windowed device
timing (traced-sampled: BB_DEVICE_TIME_SAMPLE=100/1000 unless --sample says otherwise: 100 ms of every
second, CUPTI detached in between), preload tracing with BB_DEVICE_TIME=0 (shapes-only), preload
tracing with CUPTI recording kernels but not tying them to ops (cupti-kernels: what CUPTI itself costs),
torch.profiler(record_shapes=True) without the preload, and the preload routing aten::add.Tensor to the
sample backend under a policy whose condition is false for these calls (tracing off: the cost of
deciding not to route), and no preload but one empty RecordFunction callback that asks for every op's
inputs (rf-floor: build/lib/libbb_bench_rf_floor.so loaded after torch, the floor of any tracer built on
RecordFunction; shapes-only minus rf-floor is bbshim's own tracing), and the same callback asking for
no inputs (rf-names: what observing every op by name costs without boxing its arguments), and sampled
tracing (BB_TRACE_SAMPLE=16 unless --trace-sample says otherwise: one call in N traced once the signatures
are stable) without device timing (shapes-sampled) and with first-calls device timing
(traced-first-sampled) — a fresh process measures:
  * per-op time of a tight loop of a tiny op (torch.add on 1-element tensors), best of several runs,
    each at least --op-seconds long (a whole number of sampling periods: a short run could fall
    between two windows of sampled timing and time nothing);
  * per-step time of a training step (the example model; GPT-2 small, a small Llama or BERT-base with
    --model gpt2|llama|bert, bf16 autocast on CUDA, AdamW; --model llama-tiny: the small Llama at hidden
    64 with AdamW foreach, for the CPU, where its ops cost about what launches do), median, and the mean
    of every step after the first (the steps whose calls were timed included). --op-seconds 0 leaves the
    tiny op out.
Configurations run interleaved, --rounds times, each round in fresh processes. Per-op time is the best
over rounds (noise only ever adds time to a tight loop); step time is the median over rounds. A process
that fails is reported (its stderr) and run once more; the run then ends with exit status 1. With
--ab PAIRS each process then runs PAIRS pairs of steps with RecordFunction on and off
(torch.autograd._enable_record_function; ABBA order): the median ratio is what the RecordFunction-based
tracing costs in that very process, free of the noise between processes (the "A/B x" column, median
over rounds; about 1.0 for none, which is the check). With --op-seconds too, PAIRS pairs of tiny-op
loops follow, on and off the same way: on minus off is what one call pays for RecordFunction and the
callbacks in that process (the "A/B ns" column, median over rounds).

With traced-all and traced (or traced-first, traced-first-sampled) on CUDA, each round also compares
their traces: the share of the signatures that launched device work (in traced-all's trace) with at
least 3 timed calls in the other's (of all of them, and of those called at least 3 times), and each
op's device time extrapolated from the other's timed calls (and, sampled, counts) against traced-all's
total. For the sampled configurations it prints, per round on stderr, what CUPTI was doing during each
step (from the trace's timing events: window open, attached with records off, detached), why each
window closed, and the median step from the step on which CUPTI stayed detached to the end, against
the round's none (what a step costs once its signatures are timed), so that a slow step can be told
apart from a slow mechanism, and when tracing was sampled and why not.

    python3 scripts/bench_overhead.py                      # CPU, example model
    python3 scripts/bench_overhead.py --device cuda --model gpt2 --json out.json
    python3 scripts/bench_overhead.py --device cuda --model llama --configs traced-all,traced,shapes-only \\
        --op-seconds 0 --steps 20 --rounds 5
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
CONFIGS = ["none", "disabled", "rf-floor", "rf-names", "traced", "traced-all", "traced-first", "traced-first-sampled",
           "traced-sampled", "shapes-only", "shapes-sampled", "cupti-kernels", "profiler", "route-unmet"]
REFERENCE = "traced-all"  # every call timed: what the others' extrapolated device times are compared with
COMPARED = ["traced", "traced-first", "traced-first-sampled"]  # against REFERENCE, on CUDA
MODELS = ["small", "gpt2", "llama", "bert", "llama-tiny"]
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


def tiny_op_us(a, b, seconds, reps):
    """Best per-call time over reps runs of the loop, each of at least `seconds`."""
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
    if model in ("llama", "bert"):  # replay_throughput.py's models: the sizes issue 14 names
        sys.path.insert(0, str(ROOT / "scripts"))
        import replay_throughput
        torch.manual_seed(0)
        net, make_batch, _ = replay_throughput.build_model(model)
        net.to(device).train()
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        inputs, labels = make_batch(device)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
                loss = net(input_ids=inputs[0], labels=labels).loss
            loss.backward()
            opt.step()
            return loss
        return step
    if model == "llama-tiny":  # the small Llama's structure at a size where ops cost about what launches do
        import transformers as tr
        torch.manual_seed(0)
        cfg = tr.LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=8, num_attention_heads=4,
                             num_key_value_heads=1, vocab_size=1000, max_position_embeddings=64)
        net = tr.LlamaForCausalLM(cfg).to(device).train()
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)
        ids = torch.randint(0, cfg.vocab_size, (2, 16), device=device)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
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
    """The median of `steps` steps after `warmup` more, the mean of all warmup + steps, every step's
    time (ms), and when each began and ended (time.monotonic(): the clock of the trace's timing events)."""
    import torch
    times, spans = [], []
    for i in range(warmup + steps):
        if device == "cuda":
            torch.cuda.synchronize()
        m0, t0 = time.monotonic(), time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        spans.append((m0, time.monotonic()))
    return statistics.median(times[warmup:]), statistics.fmean(times), times, spans


def worker(args):
    """One configuration in this process; prints one JSON line."""
    import torch
    if args.config in ("rf-floor", "rf-names"):
        import ctypes
        ctypes.CDLL(str(Path(args.build) / "lib" / "libbb_bench_rf_floor.so"))
    step = make_step(args.model, args.device, args.batch, args.seq)
    step()  # first call: lazy init, cuDNN/cuBLAS handles
    # The tiny op's operands, made once: the A/B's loops at the end make no call seen for the first time
    # (first-calls timing would open a window for it in the middle of the A/B).
    a, b = torch.ones(1, device=args.device), torch.ones(1, device=args.device)

    def measure():
        op_us = tiny_op_us(a, b, args.op_seconds, args.reps) if args.op_seconds > 0 else None
        return op_us, step_ms(step, args.device, args.steps, args.warmup)

    if args.config == "profiler":
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        with profile(activities=acts, record_shapes=True):
            op_us, (ms, mean, times, spans) = measure()
    else:
        op_us, (ms, mean, times, spans) = measure()
    out = {"config": args.config, "op_us": op_us, "step_ms": ms, "step_ms_mean": mean, "steps_ms": times,
           "steps_at": spans, "torch": torch.__version__}
    if args.ab:
        out["ab"] = ab_steps(step, args.device, args.ab)
        if args.op_seconds > 0:
            out["ab_op"] = ab_op(a, b, args.op_seconds, args.ab)
    print(json.dumps(out))


def ab_pairs(run, pairs):
    """run() with RecordFunction on (A) and off (B: no callback runs, as without any tracer), in pairs
    ordered ABBA: the ratio of each pair's A to its B, and its median. Between processes this host's
    times move by more than the costs at stake; within one they do not."""
    from torch.autograd import _enable_record_function

    def one(on):
        _enable_record_function(on)
        try:
            return run()
        finally:
            _enable_record_function(True)

    ratios, on, off = [], [], []
    for k in range(pairs):
        order = (True, False) if k % 2 == 0 else (False, True)
        t = {o: one(o) for o in order}
        on.append(t[True])
        off.append(t[False])
        ratios.append(t[True] / t[False])
    return {"ratio": statistics.median(ratios), "ratios": ratios, "on": statistics.median(on),
            "off": statistics.median(off)}


def ab_steps(step, device, pairs):
    """A/B (ab_pairs) of whole steps, in ms."""
    import torch

    def run():
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3
    r = ab_pairs(run, pairs)
    return {"ratio": r["ratio"], "ratios": r["ratios"], "on_ms": r["on"], "off_ms": r["off"]}


def ab_op(a, b, seconds, pairs):
    """A/B (ab_pairs) of the tiny op's loop, in us per call: on minus off is what RecordFunction and
    the callbacks cost one call in this process (a tenth of --op-seconds per loop)."""
    r = ab_pairs(lambda: add_loop_us(a, b, seconds / 10), pairs)
    return {"ratio": r["ratio"], "ratios": r["ratios"], "on_us": r["on"], "off_us": r["off"],
            "delta_us": r["on"] - r["off"]}


def cupti_per_step(events, spans):
    """From the trace's sampled-timing events (meta.device_timing.events): CUPTI's state during each
    step, the one it was in most of the step — R window open (recording), A attached with its records
    off, D detached, - not started — in lower case when it changed during the step."""
    changes = []
    for e in events or []:
        w = e.get("what", "")
        state = ("R" if w.startswith("open") else "A" if w.startswith("close") or w.startswith("not detached")
                 else "D" if w == "detached" else "-" if w.startswith("stopped") else None)
        if state:
            changes.append((e["t"], state))
    out = []
    for a, b in spans:
        state = "-"
        for t, s in changes:
            if t > a:
                break
            state = s
        held = {"R": 0.0, "A": 0.0, "D": 0.0, "-": 0.0}
        cur, changed = a, False
        for t, s in changes:
            if a < t < b:
                held[state] += t - cur
                cur, state, changed = t, s, True
        held[state] += b - cur
        most = max(held, key=held.get)
        out.append(most.lower() if changed else most)
    return " ".join(out)


def run_config(args, config):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_") and k != "LD_PRELOAD"}
    if config in ("disabled", "traced", "traced-all", "traced-first", "traced-first-sampled", "traced-sampled",
                  "shapes-only", "shapes-sampled", "cupti-kernels", "route-unmet"):
        env["LD_PRELOAD"] = str(Path(args.build) / "lib" / "libbbshim.so")
        env["BB_TRACE"] = os.path.join(args.tmp, f"bench-{os.getpid()}.yaml")
    if config == "disabled":
        env["BB_DISABLE"] = "1"
    if config == "shapes-only":  # tracing without CUPTI device timing
        env["BB_DEVICE_TIME"] = "0"
    if config in ("traced-first", "traced-first-sampled"):
        env["BB_DEVICE_TIME"] = "first"
    if config == "traced-all":
        env["BB_DEVICE_TIME"] = "all"
    if config in ("shapes-sampled", "traced-first-sampled"):
        env["BB_TRACE_SAMPLE"] = str(args.trace_sample)
    if config == "shapes-sampled":
        env["BB_DEVICE_TIME"] = "0"
    if config == "traced-sampled":
        env["BB_DEVICE_TIME_SAMPLE"] = args.sample
    if config == "rf-names":  # the floor's callback without inputs: RecordFunction without boxing
        env["BB_RF_FLOOR_INPUTS"] = "0"
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
    if r.returncode != 0:  # said at once, and again at the end; the caller runs it again (once)
        args.failures.append(f"{config} (exit status {r.returncode}):\n{r.stderr}")
        print(f"{config} failed (exit status {r.returncode}):\n{r.stderr}", file=sys.stderr, flush=True)
        return None
    result = json.loads(r.stdout.strip().splitlines()[-1])
    trace = env.get("BB_TRACE", "off")
    sampled = "BB_TRACE_SAMPLE" in env
    if (sampled or config.startswith("traced") and args.device == "cuda") and os.path.exists(trace):
        import yaml  # what device timing did: a run that timed nothing must not pass as cheap
        t = yaml.load(Path(trace).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        result["device_timing"] = t["meta"].get("device_timing")
        result["tracing"] = t["meta"].get("tracing")  # sampled tracing: when it sampled, and why not
        result["signatures"] = signature_times(t)
        os.unlink(trace)
    return result


def signature_times(trace):
    """Per signature that launched device work: op, calls, timed calls, the device time of all its calls
    (as the trace extrapolates it where not every call was timed)."""
    out = {}
    for e in trace.get("ops") or []:
        d = e.get("device_time")
        if not e.get("kernels") and not d:
            continue
        args = [{k: v for k, v in a.items() if k != "range"} for a in e.get("args") or []]
        key = e["op"] + json.dumps(args, sort_keys=True)
        timed = d["calls"] if d else 0
        total = (d.get("estimated_total_ns") or d["total_ns"]) if d else 0
        out[key] = {"op": e["op"], "count": e["count"], "timed": timed, "total_ns": total}
    return out


def compare_timing(sampled, full, min_share=0.01):
    """A configuration's trace against traced-all's (every call timed) in one round: coverage and per-op
    totals."""
    ref = {k: v for k, v in full.items() if v["timed"] > 0}
    covered = sum(1 for k in ref if sampled.get(k, {}).get("timed", 0) >= 3)
    repeated = [k for k in ref if ref[k]["count"] >= 3]
    covered_repeated = sum(1 for k in repeated if sampled.get(k, {}).get("timed", 0) >= 3)
    with_time = sum(1 for k in ref if sampled.get(k, {}).get("total_ns", 0) > 0)
    ops_full, ops_est = {}, {}
    for k, v in full.items():
        ops_full[v["op"]] = ops_full.get(v["op"], 0) + v["total_ns"]
    for k, v in sampled.items():
        ops_est[v["op"]] = ops_est.get(v["op"], 0) + v["total_ns"]
    everything = sum(ops_full.values()) or 1
    devs = {op: ops_est.get(op, 0) / t - 1 for op, t in ops_full.items() if t / everything >= min_share}
    return {"signatures": len(ref), "with_3_timed": covered, "coverage": covered / max(len(ref), 1),
            "called_3_times": len(repeated), "called_3_times_with_3_timed": covered_repeated,
            "with_device_time": with_time,
            "op_deviation": devs, "total_deviation": sum(ops_est.values()) / everything - 1}


def compared(rounds, device, config):
    """How many rounds have both the reference (every call timed) and config (on CUDA) to compare."""
    if device != "cuda" or REFERENCE not in rounds or config not in rounds:
        return 0
    return min(len(rounds[REFERENCE]), len(rounds[config]))


def compare_round(rounds, r, config):
    a, b = rounds[config][r], rounds[REFERENCE][r]
    if "signatures" not in a or "signatures" not in b:
        return None
    return compare_timing(a["signatures"], b["signatures"])


def describe_comparison(r, cmp, config):
    if not cmp:
        return f"round {r + 1}, {config}: no traces to compare"
    devs = sorted(cmp["op_deviation"].items(), key=lambda kv: -abs(kv[1]))
    return (f"round {r + 1}, {config}: of {cmp['signatures']} signatures with device work, "
            f"{cmp['with_device_time']} have a "
            f"device time and {cmp['with_3_timed']} >= 3 timed calls ({100 * cmp['coverage']:.1f}%); of the "
            f"{cmp['called_3_times']} called >= 3 times, {cmp['called_3_times_with_3_timed']}; per-op totals, "
            f"{config} extrapolated vs every call, over {len(devs)} ops with >= 1% of device time: largest "
            + (f"{devs[0][0]} {100 * devs[0][1]:+.2f}%" if devs else "-")
            + (f", median |dev| {100 * statistics.median(abs(v) for _, v in devs):.2f}%" if devs else "")
            + f"; all ops together {100 * cmp['total_deviation']:+.2f}%")


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
    p.add_argument("--model", default="small", choices=MODELS)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512, help="sequence length for gpt2")
    p.add_argument("--op-seconds", type=float, default=1.0,
                   help="each tiny-op timing runs at least this long (keep it a multiple of the sampling period); "
                   "0: no tiny-op timing")
    p.add_argument("--reps", type=int, default=5, help="tiny-op timings; the best counts")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--configs", default=",".join(CONFIGS), help="which configurations, comma-separated "
                   f"(default: all of {','.join(CONFIGS)}; none is always measured)")
    p.add_argument("--sample", default=SAMPLE, help=f"BB_DEVICE_TIME_SAMPLE of traced-sampled (default {SAMPLE})")
    p.add_argument("--trace-sample", type=int, default=16,
                   help="BB_TRACE_SAMPLE of shapes-sampled and traced-first-sampled (default 16)")
    p.add_argument("--cpus", help="run every configuration on these CPUs only (taskset's list form: 4-7 or 2,3)")
    p.add_argument("--ab", type=int, default=0, metavar="PAIRS",
                   help="after the steps, PAIRS pairs of steps in the same process with RecordFunction on and off "
                   "(ABBA): what tracing costs without the noise between processes")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--config", choices=CONFIGS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    unknown = [c for c in args.configs.split(",") if c not in CONFIGS]
    if unknown:
        p.error(f"unknown configuration {', '.join(unknown)} (known: {', '.join(CONFIGS)})")
    configs = ["none"] + [c for c in args.configs.split(",") if c != "none"]
    if args.cpus:  # the workers inherit it
        cpus = set()
        for part in args.cpus.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        os.sched_setaffinity(0, cpus)

    args.passthrough = ["--device", args.device, "--model", args.model, "--batch", str(args.batch),
                        "--seq", str(args.seq), "--op-seconds", str(args.op_seconds), "--reps", str(args.reps),
                        "--steps", str(args.steps), "--warmup", str(args.warmup), "--build", args.build,
                        "--ab", str(args.ab)]
    args.failures = []  # processes that failed (each run again once): the run ends with exit status 1
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        rounds = {c: [] for c in configs}
        for r in range(args.rounds):
            for c in configs:
                x = run_config(args, c)
                if x is None:
                    x = run_config(args, c)
                if x is None:
                    sys.exit(f"{c} failed twice in a row in round {r + 1}; stopped")
                rounds[c].append(x)
                print(f"round {r + 1}/{args.rounds} {c}: " + (f"{x['op_us']:.2f} us/op, " if x["op_us"] else "")
                      + f"{x['step_ms']:.2f} ms/step (mean {x['step_ms_mean']:.2f})", file=sys.stderr)
                d = x.get("device_timing") or {}
                if d.get("mode") not in (None, "all"):  # as it goes: a run cut short still says what timing did
                    print(f"  {d.get('windows')} windows, {d.get('detaches')} detaches, {d.get('calls_timed')} calls "
                          f"timed, {(d.get('control_ns') or 0) / 1e6:.1f} ms attaching/detaching, "
                          f"{d.get('signatures_short')} signatures short", file=sys.stderr)
                    if d.get("events") and x.get("steps_at"):
                        states = cupti_per_step(d["events"], x["steps_at"])
                        print("  CUPTI in each step (R window open, A attached with records off, D detached; "
                              "lower case: changed within the step): " + states, file=sys.stderr)
                        # Once detached for good: what device timing costs a step after its first steps.
                        states = states.split()
                        k = len(states)
                        while k > 0 and states[k - 1] == "D":
                            k -= 1
                        if k < len(states) and x.get("steps_ms") and rounds["none"]:
                            rest = statistics.median(x["steps_ms"][k:])
                            ref = rounds["none"][-1]["step_ms"]
                            print(f"  detached from step {k + 1} of {len(states)} on: median {rest:.2f} ms, "
                                  f"{rest / ref:.2f}x this round's none", file=sys.stderr)
                        closes = [e["what"] for e in d["events"] if not e["what"].startswith("open")]
                        print("  closes and detaches: " + "; ".join(closes[:30])
                              + (f"; ... ({len(closes)} in all)" if len(closes) > 30 else ""), file=sys.stderr)
                if x.get("ab"):
                    print(f"  A/B in this process (RecordFunction on / off), {len(x['ab']['ratios'])} pairs: median "
                          f"{x['ab']['ratio']:.3f} ({x['ab']['on_ms']:.2f} / {x['ab']['off_ms']:.2f} ms)",
                          file=sys.stderr)
                if x.get("ab_op"):
                    print(f"  A/B of the tiny op (RecordFunction on / off): median {x['ab_op']['ratio']:.3f} "
                          f"({x['ab_op']['on_us']:.3f} / {x['ab_op']['off_us']:.3f} us/op, "
                          f"{x['ab_op']['delta_us'] * 1e3:+.0f} ns a call)", file=sys.stderr)
                if c != "none" and x.get("steps_ms") and rounds["none"]:  # which steps paid: all, or a few?
                    ref = rounds["none"][-1]["step_ms"]
                    print(f"  steps / this round's none median: "
                          + " ".join(f"{t / ref:.2f}" for t in x["steps_ms"]), file=sys.stderr)
                tr = x.get("tracing")
                if tr:
                    print(f"  tracing: {tr.get('calls_seen')} calls seen; every call traced "
                          f"{tr.get('full_s', 0):.2f} s, sampled {tr.get('sampled_s', 0):.2f} s; "
                          + "; ".join(e["what"] for e in (tr.get("events") or [])[:10]), file=sys.stderr)
            for c in COMPARED:  # coverage, as it goes
                if compared(rounds, args.device, c) > r:
                    print(describe_comparison(r, compare_round(rounds, r, c), c), file=sys.stderr)

    tiny = args.op_seconds > 0
    med = {c: {"op_us": min(x["op_us"] for x in rounds[c]) if tiny else None,
               "op_us_median": statistics.median(x["op_us"] for x in rounds[c]) if tiny else None,
               "step_ms": statistics.median(x["step_ms"] for x in rounds[c]),
               "step_ms_mean": statistics.median(x["step_ms_mean"] for x in rounds[c])} for c in configs}
    base = med["none"]
    model = {"gpt2": "GPT-2 small", "llama": "small Llama (8 layers, hidden 1024)", "bert": "BERT-base",
             "small": "examples/train_small.py",
             "llama-tiny": "tiny Llama (8 layers, hidden 64, batch 2 x 16, AdamW foreach)"}[args.model]
    if args.model != "llama-tiny":
        model += f", batch {args.batch}" + (f", seq {args.seq}" if args.model == "gpt2" else "")
    if args.model in ("llama", "bert"):
        model = model.split(",")[0] + (", batch 4 x 512" if args.model == "llama" else ", batch 16 x 256") + \
            (", bf16 autocast" if args.device == "cuda" else "")
    print(f"machine: {describe_machine(args.device)}; date {time.strftime('%Y-%m-%d')}"
          + (f"; CPUs {args.cpus}" if args.cpus else ""))
    print((f"tiny op: torch.add on 1-element {args.device} tensors, best of {args.reps} x {args.op_seconds} s per "
           f"process, best over {args.rounds} rounds (median in brackets); " if tiny else "")
          + f"step: {model}, median of {args.steps} steps after {args.warmup} + 1 more, median over "
          f"{args.rounds} rounds; mean: of all {args.warmup + args.steps} steps after the first")
    ab = args.ab > 0
    print(f"{'config':<22}{'us/op':>8}{'(median)':>10}{'delta us':>10}{'ms/step':>10}{'step x':>8}"
          f"{'mean ms':>10}{'mean x':>8}" + (f"{'A/B x':>8}" if ab else "") + (f"{'A/B ns':>8}" if ab and tiny else ""))
    for c in configs:
        m = med[c]
        op = (f"{m['op_us']:>8.2f}{'(' + format(m['op_us_median'], '.2f') + ')':>10}"
              f"{m['op_us'] - base['op_us']:>+10.2f}") if tiny else f"{'-':>8}{'':>10}{'':>10}"
        print(f"{c:<22}{op}{m['step_ms']:>10.2f}{m['step_ms'] / base['step_ms']:>8.3f}"
              f"{m['step_ms_mean']:>10.2f}{m['step_ms_mean'] / base['step_ms_mean']:>8.3f}"
              + (f"{statistics.median(x['ab']['ratio'] for x in rounds[c]):>8.3f}" if ab else "")
              + (f"{statistics.median(x['ab_op']['delta_us'] for x in rounds[c]) * 1e3:>+8.0f}" if ab and tiny else ""))
    prof_cost = med["profiler"]["op_us"] - base["op_us"] if tiny and "profiler" in med else 0
    ours = med["traced"]["op_us"] - base["op_us"] if tiny and "traced" in med else 0
    if prof_cost > 0 and "traced" in med:
        print(f"tracing costs {ours / prof_cost:.2f}x the profiler's per-op overhead")
    if prof_cost > 0 and "traced-sampled" in med:
        sampled = med["traced-sampled"]["op_us"] - base["op_us"]
        print(f"tracing with sampled device timing ({args.sample} ms) costs {sampled / prof_cost:.2f}x the profiler's "
              f"per-op overhead")
    for c in ("traced", "traced-first", "traced-first-sampled", "traced-sampled"):
        for x in rounds.get(c, [])[-1:]:
            d = x.get("device_timing")
            if not d:
                continue
            print(f"  {c}, last round's trace: status {d.get('status')}, mode {d.get('mode')}, {d.get('sampled')}, "
                  f"windows {d.get('windows')}, CUPTI detached between {d.get('detaches')} of them, calls timed "
                  f"{d.get('calls_timed')}, cut {d.get('cut_calls')}, attaching/detaching "
                  f"{(d.get('control_ns') or 0) / 1e6:.1f} ms, CUPTI's overhead records "
                  f"{(d.get('cupti_overhead_ns') or 0) / 1e6:.1f} ms")
    comparisons = {c: [compare_round(rounds, r, c) for r in range(compared(rounds, args.device, c))] for c in COMPARED}
    for c in COMPARED:
        for r, cmp in enumerate(comparisons[c]):
            if cmp:
                print(describe_comparison(r, cmp, c))
    comparisons = {c: [x for x in cmps if x] for c, cmps in comparisons.items() if cmps}
    if args.json:
        for rs in rounds.values():  # the per-signature lists made the comparisons above; too long to keep
            for x in rs:
                x.pop("signatures", None)
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "model": args.model, "rounds": rounds, "median": med,
                       "comparisons": comparisons, "machine": describe_machine(args.device),
                       "failures": args.failures}, f, indent=1)
    if args.failures:
        print(f"{len(args.failures)} process(es) failed and were run again:")
        for f in args.failures:
            print("  " + f.rstrip().replace("\n", "\n    "))
        sys.exit(1)


if __name__ == "__main__":
    main()
