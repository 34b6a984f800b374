"""Running the program: one process per run, under the preload, each with its own trace and summary.

Every run gets the same environment (the caller's, less any bbshim setting and preload it had, plus
PYTHONHASHSEED fixed), the same working directory and the same command; only the preload's settings
differ between the modes: native (traced, nothing routed), routed (BB_BACKEND, BB_POLICY) and shadow
(a shadow-mode policy).
"""
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

STDERR_TAIL_LINES = 20
# Settings of the user's that are not under comparison and that every run keeps alike: where compiled
# kernels are cached and which compilers build them.
KEPT_BB = {"BB_CACHE", "BB_CXX", "BB_NVCC", "BB_CUDA_ARCH", "BB_JOBS"}


def base_env(environ=None):
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if (not k.startswith("BB_") or k in KEPT_BB) and k != "LD_PRELOAD"}
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def exit_text(code):
    """'exit status 1', 'killed by SIGSEGV', 'timed out'."""
    if code is None:
        return "timed out"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def read_yaml(path):
    """A trace or policy as data, or None when the file is missing or unreadable (the run said why)."""
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None


def read_text(path):
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def run_once(command, mode, index, settings, workdir, preload, timeout):
    """Runs `command` once; a dict with what it printed, how it ended, its trace and routing summary."""
    trace = workdir / f"{mode}-{index}.yaml"
    summary = workdir / f"{mode}-{index}.summary.txt"
    env = base_env()
    env.update({"LD_PRELOAD": str(preload), "BB_TRACE": str(trace), "BB_SUMMARY": str(summary)})
    env.update(settings)
    start = time.perf_counter()
    try:
        p = subprocess.run(command, env=env, capture_output=True, text=True, errors="replace",
                           stdin=subprocess.DEVNULL, timeout=timeout)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code = None
        out = _text(e.stdout)
        err = _text(e.stderr)
    except OSError as e:  # the command does not exist or cannot be executed
        code, out, err = 127, "", f"bbcompare: cannot run {command[0]}: {e}\n"
    wall = time.perf_counter() - start
    return {"mode": mode, "index": index, "exit": code, "ended": exit_text(code), "ok": code == 0,
            "wall_s": wall, "stdout": out, "stderr": err,
            "stderr_tail": "\n".join(err.rstrip("\n").splitlines()[-STDERR_TAIL_LINES:]),
            "trace": read_yaml(trace), "summary": read_text(summary)}


def _text(b):
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


def shadow_policy(backend, policy, path):
    """Writes a policy that runs in shadow mode what `policy` (a file, or None: every op of `backend`)
    would route; returns its path."""
    if policy:
        data = read_yaml(policy) or {}
        if not isinstance(data, dict):
            data = {}
        base = Path(policy).resolve().parent
        if isinstance(data.get("backend"), str):  # relative to the policy's own folder
            data["backend"] = str((base / data["backend"]).resolve())
        data.setdefault("version", 1)
        default = data.setdefault("default", {}) or {}
        data["default"] = default
        default["mode"] = "shadow"
        for rule in (data.get("ops") or {}).values():
            if isinstance(rule, dict) and rule.get("mode", "route") == "route":
                rule["mode"] = "shadow"
    else:
        data = {"version": 1, "default": {"mode": "shadow"}, "ops": {op: {} for op in backend_ops(backend)}}
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def backend_ops(backend):
    """The ops a backend folder has kernels for, by its sub-folders' names (`add__Tensor` is
    aten::add.Tensor, `relu__default` aten::relu)."""
    ops = []
    for folder in sorted(Path(backend).iterdir()):
        name, sep, overload = folder.name.rpartition("__")
        if folder.is_dir() and sep and name:
            ops.append(f"aten::{name}" + ("" if overload == "default" else f".{overload}"))
    return ops


def mode_settings(args, workdir):
    """The preload's settings for each mode that this comparison runs."""
    routed = {}
    if args.backend:
        routed["BB_BACKEND"] = str(Path(args.backend).resolve())
    if args.policy:
        routed["BB_POLICY"] = str(Path(args.policy).resolve())
    modes = {"native": {}, "routed": routed}
    if args.shadow:
        shadow = {k: v for k, v in routed.items() if k != "BB_POLICY"}
        shadow["BB_POLICY"] = str(shadow_policy(args.backend, args.policy, workdir / "shadow-policy.yaml"))
        modes["shadow"] = shadow
    if args.device_time is False:
        for s in modes.values():
            s["BB_DEVICE_TIME"] = "0"
    return modes


def policy_backend(policy):
    """The backend: key of a policy file, or None (no file, not a map, no key: the preload says why)."""
    data = read_yaml(policy) if policy else None
    return data.get("backend") if isinstance(data, dict) and isinstance(data.get("backend"), str) else None


def routed_backend(args):
    """The folder the routed run loads: --backend, else the policy's backend: key (relative to it)."""
    if args.backend:
        return str(Path(args.backend).resolve())
    named = policy_backend(args.policy)
    return str((Path(args.policy).resolve().parent / named).resolve()) if isinstance(named, str) else None


def build_backend(backend, preload, say):
    """Compiles the backend into the kernel cache before anything is timed (`bbbackend build`, next to
    the preload's folder), so that no routed run's wall time includes compiling it. Its problems are the
    preload's to report again in the routed run; this only warms the cache."""
    tool = Path(preload).resolve().parent.parent / "bin" / "bbbackend"
    if not backend or not tool.is_file():
        return
    say(f"compiling {backend} ahead of the runs ({tool.name} build)")
    try:
        subprocess.run([str(tool), "build", str(backend)], env=base_env(), capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as e:
        say(f"{tool.name} build {backend}: {e}")


def run_all(args, workdir, preload, say):
    """Every run, interleaved (native, routed, shadow, native, ...) so that drift on the machine
    touches every mode alike."""
    modes = mode_settings(args, workdir)
    build_backend(routed_backend(args), preload, say)
    runs = []
    for i in range(args.runs):
        for mode, settings in modes.items():
            say(f"{mode} run {i + 1}/{args.runs}")
            r = run_once(args.command, mode, i, settings, workdir, preload, args.timeout)
            if not r["ok"]:
                say(f"{mode} run {i + 1}: {r['ended']}")
            runs.append(r)
    return list(modes), runs
