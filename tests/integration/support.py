"""Helpers for the integration tests: run programs with the preload, read traces.

The tests run under ctest (tests/CMakeLists.txt), which sets BB_BUILD_DIR; the Python running them is
the one the build was made for.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("BB_BUILD_DIR", ROOT / "build")).resolve()
PRELOAD = BUILD / "lib" / "libbbshim.so"
BBTRACE = BUILD / "bin" / "bbtrace"
PYTHON = sys.executable
EXAMPLE = ROOT / "examples" / "train_small.py"
HERE = Path(__file__).resolve().parent


def base_env():
    """The test's environment without any bbshim setting or preload leaking in."""
    # BB_CACHE is test infrastructure (ctest points it into the build folder), not a setting under test.
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("BB_") or k == "BB_CACHE") and k != "LD_PRELOAD"}
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    return env


def preload_env(preload=PRELOAD, **bb):
    env = base_env()
    env["LD_PRELOAD"] = str(preload)
    env.update({k: str(v) for k, v in bb.items()})
    return env


def run(cmd, env, cwd=None, timeout=180):
    return subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL,
                          timeout=timeout)


def trace_example(directory, steps=1):
    """Traces the example model's training for `steps` steps into DIRECTORY/example.yaml; returns its path."""
    trace = Path(directory) / "example.yaml"
    r = run([PYTHON, EXAMPLE, "--steps", str(steps)], preload_env(BB_TRACE=trace), cwd=directory, timeout=600)
    assert r.returncode == 0, r.stderr
    return trace


def load_trace(path):
    """Parses a trace with PyYAML (an independent reader) and checks its outline."""
    with open(path) as f:
        data = yaml.safe_load(f)
    assert data["version"] == 1, data.get("version")
    assert isinstance(data["meta"], dict)
    assert isinstance(data["ops"], list)
    return data


def wait_for(predicate, timeout=60.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return False


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="bbshim-it-"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class ReplayOfProgram(unittest.TestCase):
    """Traces PROGRAM once for the class (preloaded), then replays that trace with bbreplay."""
    PROGRAM = ""

    @classmethod
    def setUpClass(cls):
        cls.dir = Path(tempfile.mkdtemp(prefix="bbshim-replay-"))
        cls.trace = cls.dir / "trace.yaml"
        r = run([PYTHON, "-c", cls.PROGRAM], preload_env(BB_TRACE=cls.trace), cwd=cls.dir)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def replay(self, *args, timeout=600):
        """bbreplay on the trace with `args`; (its JSON report, the finished process)."""
        out = self.dir / "report.json"
        r = run([BUILD / "bin" / "bbreplay", self.trace, "--json", out, *args], base_env(), timeout=timeout)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        return json.loads(out.read_text()), r


def nvidia_gpu_present():
    """Whether this machine has an NVIDIA GPU, asked of the driver, not of torch: a device node, or a GPU
    that `nvidia-smi -L` lists."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False  # the GPUs were hidden on purpose
    if any(Path("/dev").glob("nvidia[0-9]*")):
        return True
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and any(line.startswith("GPU ") for line in r.stdout.splitlines())


class CudaBroken(RuntimeError):
    """The machine has an NVIDIA GPU but torch cannot use it: a broken install, never a reason to skip."""


def cuda_available():
    """True when torch can use CUDA; False on a machine without an NVIDIA GPU. Raises CudaBroken when the
    machine has a GPU and torch cannot use it, so that a broken driver or a CPU build of torch fails the
    GPU tests instead of skipping them."""
    code = ("import sys, torch; print(torch.__version__, 'built for CUDA', torch.version.cuda); "
            "sys.exit(0 if torch.cuda.is_available() else 1)")
    r = run([PYTHON, "-c", code], base_env())
    if r.returncode == 0:
        return True
    if not nvidia_gpu_present():
        return False
    raise CudaBroken(f"this machine has an NVIDIA GPU but {PYTHON} cannot use CUDA through torch "
                     f"(torch {r.stdout.strip() or '?'}; exit {r.returncode}). Fix the driver or the install; "
                     f"GPU tests are skipped only on machines without a GPU.\n{r.stderr.strip()}")


def skip_unless_cuda():
    """For a GPU test file's main: exit 77 (ctest: skipped) where there is no NVIDIA GPU; exit 1 with the
    reason where there is one that torch cannot use."""
    try:
        if cuda_available():
            return
    except CudaBroken as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    print("no NVIDIA GPU on this machine: skipped")
    sys.exit(77)


__all__ = ["ROOT", "BUILD", "PRELOAD", "BBTRACE", "PYTHON", "EXAMPLE", "HERE", "base_env", "preload_env",
           "run", "load_trace", "wait_for", "TempDirTest", "ReplayOfProgram", "cuda_available", "nvidia_gpu_present",
           "CudaBroken", "skip_unless_cuda", "signal"]
