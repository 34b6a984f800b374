#!/usr/bin/env python3
"""What routing one call costs the host: a small aten::relu called in a loop, natively and routed through
the preload to a C++ kernel and to a Python kernel.

    scripts/routed_call_cost.py [--device cpu|cuda] [--calls 20000] [--rounds 5] [--numel 256] [--build DIR]

Each configuration runs in a fresh process: the program makes one tensor of --numel floats and times
--calls calls of torch.relu on it, best of --rounds rounds (a device synchronization closes each round on
CUDA: the tensor is small, so the loop is bound by the host). Configurations:
- native: no preload;
- preload, nothing routed: the preload with tracing off and no backend (what the hooks cost alone);
- C++ kernel: relu routed to backends/cpu_reference (CPU) or backends/cuda_example (CUDA);
- the Python kernel's function called directly, without the preload (what its own work costs);
- Python kernel: relu routed to a @bbshim.kernel written here (NumPy on the CPU; on CUDA
  backends/triton_example's Triton relu, BackendBench's layout), as FlagGems' and Liger's kernels are.
Printed: microseconds per call, what routing adds to a native call, and for the Python kernel what routing
adds to calling its function directly (the cost of the preload, the bridge into Python and back). The routing summary of each
routed run must show every call routed, or the line says what it shows instead.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import importlib.util, sys, time, torch
device, calls, rounds, numel, call = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
x = torch.randn(numel, device=device)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
fn = torch.relu
if call == "numpy":  # the NumPy kernel's body, called as a function
    import numpy as np
    fn = lambda t: torch.from_numpy(np.maximum(t.detach().contiguous().numpy(), 0))
elif call != "op":  # FILE:FUNCTION, a kernel file's function called as a function
    path, name = call.rsplit(":", 1)
    spec = importlib.util.spec_from_file_location("kernel_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, name)
for _ in range(200):
    fn(x)
sync()
best = float("inf")
for _ in range(rounds):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x)
    sync()
    best = min(best, (time.perf_counter() - t0) / calls)
print(f"{best * 1e6:.3f}")
"""

NUMPY_RELU = '''"""relu in NumPy, as a Python kernel (scripts/routed_call_cost.py): the work is NumPy's, the rest routing."""
import bbshim
import numpy as np
import torch


@bbshim.kernel("aten::relu")
def relu(x):
    if x.device.type != "cpu" or x.dtype != torch.float32:
        raise bbshim.Decline("float32 on the CPU only")
    return torch.from_numpy(np.maximum(x.detach().contiguous().numpy(), 0))
'''


def run(args, env_extra, summary=None, call="op"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_") and k != "LD_PRELOAD"}
    env.update(env_extra)
    if summary:
        env["BB_SUMMARY"] = str(summary)
    r = subprocess.run([sys.executable, "-c", PROGRAM, args.device, str(args.calls), str(args.rounds),
                        str(args.numel), call], env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"routed_call_cost: a run failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return float(r.stdout.split()[-1])


def routed_row(summary):
    """(calls, routed) of aten::relu in a routing summary, or None."""
    if not summary.exists():
        return None
    for line in summary.read_text().splitlines():
        f = line.split()
        if f and f[0] == "aten::relu" and len(f) >= 4:
            return int(f[2]), int(f[3])
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--numel", type=int, default=256)
    p.add_argument("--build", type=Path, default=Path(os.environ.get("BB_BUILD_DIR", ROOT / "build")))
    args = p.parse_args()
    preload = {"LD_PRELOAD": str(args.build / "lib" / "libbbshim.so"), "BB_TRACE": "off"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.device == "cpu":
            cpp = ROOT / "backends" / "cpu_reference"
            python = tmp / "python"
            (python / "relu__default").mkdir(parents=True)
            (python / "relu__default" / "relu.py").write_text(NUMPY_RELU)
            what, direct = "NumPy", "numpy"
        else:
            cpp, python, what = ROOT / "backends" / "cuda_example", ROOT / "backends" / "triton_example", "Triton"
            direct = f"{python / 'relu__default' / 'relu__default_implementation_v1.py'}:relu__default_kernel_impl"
        configs = [("native", {}, None, "op"), ("preload, nothing routed", preload, None, "op"),
                   (f"C++ kernel ({cpp.name})", dict(preload, BB_BACKEND=str(cpp)), tmp / "cpp.txt", "op"),
                   (f"{what} function, called directly", {}, None, direct),
                   (f"Python kernel ({what}), routed", dict(preload, BB_BACKEND=str(python)), tmp / "py.txt", "op")]
        # (relu alone: the backend's other ops stay native)
        (tmp / "p.yaml").write_text("version: 1\nops:\n  aten::relu: {}\n")
        print(f"torch.relu on {args.numel} float32 on {args.device}, {args.calls} calls, best of {args.rounds} rounds")
        native = None
        direct_us = None
        for name, env, summary, call in configs:
            if summary:
                env = dict(env, BB_POLICY=str(tmp / "p.yaml"))
            us = run(args, env, summary, call)
            if call != "op":
                direct_us = us
            native = us if native is None else native
            line = f"  {name:<32} {us:9.3f} us a call"
            if name != "native":
                line += f"   {us - native:+9.3f} us over native"
            if name.startswith("Python kernel") and direct_us is not None:
                line += f"   {us - direct_us:+9.3f} us over the function called directly"
            if summary:
                row = routed_row(summary)
                if row is None:
                    line += "   (no routing summary: nothing was routed?)"
                else:
                    calls, routed = row
                    if routed != calls:
                        line += f"   (routed {routed} of {calls} calls: not a routed figure)"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
