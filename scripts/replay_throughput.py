#!/usr/bin/env python3
"""bbreplay's throughput on real-model traces: how long a whole trace takes to check and time, and where
the time goes.

    scripts/replay_throughput.py [--models gpt2,llama,bert,resnet50] [--device cuda] [--build DIR]
                                 [--out DIR] [--limit SECONDS] [--reuse-traces] [--trace-only]
                                 [--device-time] [-- BBREPLAY ARGS...]

For each model, one training step is traced under the preload (built from its config or constructor, no
weights: GPT-2 small at batch 8 x 512; a small Llama of 8 layers, hidden 1024, 16 heads / 4 KV heads,
intermediate 2816, vocab 32000, batch 4 x 512; BERT-base at batch 16 x 256, masked LM; torchvision
ResNet-50 at batch 32 x 224 x 224; and, asked by name only, `llama1b`, a model of Llama 3.2 1B's shape
(16 layers, hidden 2048, 32 heads / 8 KV heads, intermediate 8192, vocab 128256, tied embeddings: 1.24 B
parameters) at batch 4 x 512, the issue's largest size; bf16 autocast on CUDA, AdamW, seeded), then replayed native against
native (`bbreplay TRACE --device DEVICE --json ...`: every case, variants included, checked and timed,
unless BBREPLAY ARGS say otherwise). Printed per trace: cases, wall seconds, seconds per case, the
seconds of each phase (the report's per-case `spent`, summed; docs/replay.md), traced cases against
variants, and the self-check's outcome. `--limit` interrupts a replay after that many seconds (SIGINT:
bbreplay writes the cases done so far) and the line says how many of how many cases ran and projects
the whole trace's wall time from their pace. A table of every trace closes the output. `--profile` also
prints, per trace, the source lines of bbreplay's processes that took the most time (BB_REPLAY_PROFILE,
replay/case/spent.h): each phase's scopes, each device synchronization, and what the kernel's process
reported. Traces and reports stay in --out.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["gpt2", "llama", "bert", "resnet50"]
KNOWN = MODELS + ["llama1b"]  # (the default list, and what may be asked for by name)


def build_model(name):
    """The model, a function making one batch (inputs, labels) on `device`, and its description."""
    import torch
    if name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50(weights=None)

        def batch(device):
            return (torch.randn(32, 3, 224, 224, device=device),), torch.randint(0, 1000, (32,), device=device)
        return model, batch, "torchvision resnet50, batch 32 x 3 x 224 x 224"
    import transformers as tr
    if name == "gpt2":
        model, (b, s), vocab = tr.GPT2LMHeadModel(tr.GPT2Config()), (8, 512), 50257
        what = "GPT-2 small (12 layers, hidden 768), batch 8 x 512"
    elif name == "llama":
        cfg = tr.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
        model, (b, s), vocab = tr.LlamaForCausalLM(cfg), (4, 512), 32000
        what = "Llama (8 layers, hidden 1024, 16 heads / 4 KV heads, intermediate 2816, vocab 32000), batch 4 x 512"
    elif name == "llama1b":
        cfg = tr.LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                             num_key_value_heads=8, vocab_size=128256, max_position_embeddings=1024,
                             tie_word_embeddings=True)
        model, (b, s), vocab = tr.LlamaForCausalLM(cfg), (4, 512), 128256
        what = ("Llama 3.2 1B's shape (16 layers, hidden 2048, 32 heads / 8 KV heads, intermediate 8192, vocab "
                "128256, tied embeddings), batch 4 x 512")
    elif name == "bert":
        model, (b, s), vocab = tr.BertForMaskedLM(tr.BertConfig()), (16, 256), 30522
        what = "BERT-base (12 layers, hidden 768), masked LM, batch 16 x 256"
    else:
        raise SystemExit(f"unknown model {name}; known: {', '.join(KNOWN)}")

    def batch(device):
        ids = torch.randint(0, vocab, (b, s), device=device)
        return (ids,), ids.clone()
    return model, batch, what


def train_step(name, device):
    """One training step (forward, loss, backward, AdamW step, zero_grad), run under the preload."""
    import torch
    torch.manual_seed(0)
    model, batch, what = build_model(name)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    inputs, labels = batch(device)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
        if name == "resnet50":
            loss = torch.nn.functional.cross_entropy(model(*inputs), labels)
        else:
            loss = model(input_ids=inputs[0], labels=labels).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    if device == "cuda":
        torch.cuda.synchronize()
    print(f"{name}: {what}; loss {loss.item():.4f}")


def trace(name, args, path):
    env = dict(os.environ, LD_PRELOAD=str(args.build / "lib" / "libbbshim.so"), BB_TRACE=str(path))
    if not args.device_time:
        env["BB_DEVICE_TIME"] = "0"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, __file__, "--step", name, "--device", args.device], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"tracing {name} failed:\n{r.stdout}\n{r.stderr}")
    return time.monotonic() - t0, r.stdout.strip()


def replay(path, report, args, profile=None):
    cmd = [str(args.build / "bin" / "bbreplay"), str(path), "--device", args.device, "--json", str(report),
           *args.bbreplay_args]
    env = dict(os.environ)
    if profile:
        env["BB_REPLAY_PROFILE"] = str(profile)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=args.limit)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)  # bbreplay writes the report of the cases done so far
        out, err = p.communicate()
    return time.monotonic() - t0, p.returncode, out, err


def untimed_for_memory(cases):
    """Traced cases that passed their checks and ran out of device memory while timed (no times)."""
    return [c for c in cases if c["variant"] == "traced" and c["status"] == "passed"
            and c.get("message", "").startswith("not timed: the device ran out of memory")]


def table_row(name, report, wall):
    """One row of the closing table: the trace, its cases, wall time, the largest phases, the self-check."""
    data = json.loads(report.read_text())
    cases = data["cases"]
    spent = Counter()
    for c in cases:
        spent.update(c["spent"])
    total = sum(spent.values()) or 1e-9
    top = ", ".join(f"{p} {100 * s / total:.0f}%" for p, s in spent.most_common(4))
    o = data["overall"]
    other = 100 * spent.get("other in the worker", 0) / total
    done = len(cases)
    interrupted = data["meta"].get("interrupted")
    of = f"{done} of {interrupted.split(' of ')[1].split()[0]}" if interrupted else f"{done}"
    check = (f"{o['passed']} passed, {o['failed']} failed, {o['crashed']} crashed, {o['skipped']} skipped, "
             f"{o['flagged']} flagged, {o['invalid']} invalid")
    if untimed := len(untimed_for_memory(cases)):
        check += f" ({untimed} traced passed but not timed: out of device memory)"
    return f"| {name} | {of} | {wall:.0f} | {wall / max(done, 1):.3f} | {top} | {other:.1f}% | {check} |"


def summarize(name, report, wall, rc, err):
    data = json.loads(report.read_text())
    cases = data["cases"]
    spent = Counter()
    for c in cases:
        spent.update(c["spent"])
    traced = [c for c in cases if c["variant"] == "traced"]
    o = data["overall"]
    lines = [f"{name}: {len(cases)} cases in {wall:.1f} s wall ({wall / max(len(cases), 1):.3f} s a case), "
             f"bbreplay exit {rc}"]
    interrupted = data["meta"].get("interrupted")
    if interrupted:
        total = int(interrupted.split(" of ")[1].split()[0])
        lines.append(f"  INTERRUPTED at the limit: {interrupted}; at this pace the whole trace ({total} cases) "
                     f"would take about {wall / max(len(cases), 1) * total:.0f} s")
    lines.append(f"  traced cases {len(traced)}: {sum(c['wall_s'] for c in traced):.1f} s; variants "
                 f"{len(cases) - len(traced)}: {sum(c['wall_s'] for c in cases if c['variant'] != 'traced'):.1f} s")
    total = sum(spent.values())
    for phase, s in spent.most_common():
        lines.append(f"  {phase:28s} {s:8.1f} s  {100 * s / max(total, 1e-9):5.1f}%")
    samples = sorted(c["native"]["samples"] for c in traced if c.get("native"))
    if samples:
        lines.append(f"  timed pairs per traced case: median {samples[len(samples) // 2]}, "
                     f"min {samples[0]}, max {samples[-1]}")
    lines.append(f"  self-check: {o['passed']} passed, {o['failed']} failed, {o['crashed']} crashed or timed out, "
                 f"{o['skipped']} skipped, {o['flagged']} flagged, {o['invalid']} invalid")
    untimed = untimed_for_memory(cases)
    if untimed:
        lines.append(f"  traced cases passed but not timed, out of device memory: {len(untimed)}")
        for c in untimed[:10]:
            lines.append(f"    {c['op']} ({c['signature']}): {c['message'][:200]}")
    bad = [c for c in cases if c["status"] in ("failed", "crashed", "timeout", "invalid") or c["flags"]]
    for c in bad[:10]:
        lines.append(f"    {c['status']}: {c['op']} ({c['signature']}) {c['variant']}: {c['message'][:200]}")
    if err.strip() and rc not in (0, 1):
        lines.append("  stderr: " + err.strip()[-500:])
    return "\n".join(lines)


def profile_lines(prefix, wall, top=30):
    """The places that took the most time, over every process's PREFIX.<pid>-<start>.tsv (replay/case/spent.h)."""
    sites = Counter()
    counts = Counter()
    for f in prefix.parent.glob(prefix.name + ".*.tsv"):
        for row in f.read_text().splitlines()[1:]:
            what, file, line, count, seconds = row.split("\t")
            sites[(what, f"{file}:{line}")] += float(seconds)
            counts[(what, f"{file}:{line}")] += int(count)
    if not sites:
        return f"  (no profile was written under {prefix}.*)"
    lines = [f"  profile, the {top} costliest places (seconds, share of the wall time, times, ms each):"]
    for (what, where), s in sites.most_common(top):
        n = counts[(what, where)]
        lines.append(f"    {s:8.2f} s {100 * s / max(wall, 1e-9):5.1f}%  {n:8d}  {1000 * s / max(n, 1):8.3f} ms  "
                     f"{what:26s} {where}")
    return "\n".join(lines)


def main():
    if "--step" in sys.argv:  # the traced child
        p = argparse.ArgumentParser()
        p.add_argument("--step")
        p.add_argument("--device")
        a = p.parse_args()
        train_step(a.step, a.device)
        return 0
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--device", default="cuda")
    p.add_argument("--build", type=Path, default=Path(os.environ.get("BB_BUILD_DIR", ROOT / "build")))
    p.add_argument("--out", type=Path, default=Path("replay-throughput"))
    p.add_argument("--limit", type=float, default=None, help="interrupt each replay after this many seconds")
    p.add_argument("--reuse-traces", action="store_true",
                   help="replay a model's trace already in --out instead of tracing it again (the same cases)")
    p.add_argument("--trace-only", action="store_true", help="trace the models, replay nothing")
    p.add_argument("--device-time", action="store_true",
                   help="trace with the preload's device timing on (its default: first calls, extrapolated), for "
                        "reports that give each op's share of the step's device time; off by default")
    p.add_argument("--profile", action="store_true",
                   help="also print the source lines of bbreplay's processes that took the most time")
    args = p.parse_args(argv)
    args.bbreplay_args = extra
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        path = args.out / f"{name}.yaml"
        if args.reuse_traces and path.exists():
            print(f"{name}: replaying the trace already there, {path}", flush=True)
        else:
            seconds, said = trace(name, args, path)
            print(f"{name}: traced in {seconds:.1f} s ({said})", flush=True)
        if args.trace_only:
            continue
        report = args.out / f"{name}.json"
        profile = None
        if args.profile:
            profile = (args.out / f"{name}-profile" / "p").resolve()
            profile.parent.mkdir(exist_ok=True)
            for f in profile.parent.glob("p.*.tsv"):
                f.unlink()
        wall, rc, out, err = replay(path, report, args, profile)
        if not report.exists():
            print(f"{name}: bbreplay exited {rc} without a report:\n{err[-2000:]}", flush=True)
            continue
        print(summarize(name, report, wall, rc, err), flush=True)
        rows.append(table_row(name, report, wall))
        if profile:
            print(profile_lines(profile, wall), flush=True)
    if rows:
        print("\n| trace | cases | wall s | s a case | largest phases | other | self-check |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
