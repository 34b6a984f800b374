#!/usr/bin/env python3
"""bbreplay over a Ray cluster: the trace's cases in N parts, one Ray task each, merged into one report.

    scripts/bbreplay_ray.py TRACE --parts N [--backend DIR] [--policy F] [--device cpu|cuda]
                            [--address HOST:PORT] [--bbreplay PATH | --ship-build] [--max-retries R]
                            [--cpus-per-part C] [--parts-dir DIR] [--json F] [--csv F] [--markdown F]
                            [-- BBREPLAY ARGS...]

Each part runs `bbreplay TRACE --shard K/N --json PART` (docs/replay.md, "Parts of a run") as a Ray task:
with one GPU (`num_gpus=1`; Ray sets CUDA_VISIBLE_DEVICES) for `--device cuda`, with `--cpus-per-part`
CPUs (and as many intra-op threads) for `--device cpu`. The trace, the backend folder and the policy go
to the workers through Ray's object store, as bytes: no shared file system is needed. A part whose task
died (its worker or node lost, bbreplay killed by a signal) is run again, up to `--max-retries` times;
a part that failed as bad usage or bad input (bbreplay's exit status 2) is not. Progress goes to stderr,
one line per part. Then `bbreplay merge` makes the report one run would have made; its exit status is
this script's: 0 every checked case passed, 1 some case failed, 2 bad usage, a part that could not be
run, or a cluster that does not answer.

`--address` connects to a running cluster (`ray start --head` on one node, `ray start --address=...`
on the others); without it a local Ray is started with this machine's CPUs and GPUs, listening on the
loopback address only. Every node needs
bbreplay built against the same torch at the same path (docs/replay.md says how): `--bbreplay` names it
(default: this checkout's build/bin/bbreplay), or `--ship-build` sends this machine's build/bin/bbreplay
and build/include through the object store.
"""
import argparse
import io
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWNED = ("--shard", "--json", "--csv", "--markdown", "--backend", "--policy", "--device", "--gpus", "--list")


class Usage(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", type=Path)
    p.add_argument("--parts", type=int, required=True, help="how many parts (Ray tasks) to split the cases into")
    p.add_argument("--backend", type=Path, help="backend folder (default: native against native)")
    p.add_argument("--policy", type=Path, help="routing policy (its tolerances)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--address", help="a running Ray cluster (HOST:PORT, or auto); default: start a local one")
    p.add_argument("--bbreplay", default=str(ROOT / "build" / "bin" / "bbreplay"),
                   help="bbreplay's path on the nodes (default: %(default)s)")
    p.add_argument("--ship-build", action="store_true",
                   help="send build/bin/bbreplay and build/include to the workers instead")
    p.add_argument("--max-retries", type=int, default=3, help="runs again of a part whose task died")
    p.add_argument("--cpus-per-part", type=int, default=1, help="CPUs (and intra-op threads) of a --device cpu part")
    p.add_argument("--local-cpus", type=int, help="CPUs of a local Ray (default: this machine's)")
    p.add_argument("--parts-dir", type=Path, help="keep the parts' JSON reports here (default: a temporary folder)")
    p.add_argument("--json", type=Path)
    p.add_argument("--csv", type=Path)
    p.add_argument("--markdown", type=Path)
    args, extra = p.parse_known_args(argv)
    if extra and extra[0] == "--":
        extra = extra[1:]
    for a in extra:
        if a.split("=")[0] in OWNED:
            raise Usage(f"{a.split('=')[0]} is this script's to set (see --help), not one of the BBREPLAY ARGS")
    if args.parts < 1:
        raise Usage(f"--parts {args.parts}: at least 1")
    if args.max_retries < 0 or args.cpus_per_part < 1:
        raise Usage("--max-retries must be >= 0 and --cpus-per-part >= 1")
    if not args.trace.is_file():
        raise Usage(f"{args.trace}: no such file")
    if args.backend and not args.backend.is_dir():
        raise Usage(f"--backend {args.backend}: not a folder")
    if args.policy and not args.policy.is_file():
        raise Usage(f"--policy {args.policy}: no such file")
    return args, extra


def pack(folder, arcname):
    """A folder as tar.gz bytes (hidden entries and __pycache__ left out)."""
    def keep(info):
        name = Path(info.name).name
        return None if name.startswith(".") and info.name != arcname or name == "__pycache__" else info
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(folder), arcname=arcname, filter=keep)
    return buf.getvalue()


def unpack(data, into):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(into, filter="data")


def payload(args):
    """What every part needs, as bytes: trace, backend, policy, and the build when it is shipped."""
    build = None
    if args.ship_build:
        bin_ = ROOT / "build" / "bin" / "bbreplay"
        if not bin_.is_file():
            raise Usage(f"--ship-build: {bin_} is not built (./scripts/test -R nothing builds it)")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(str(bin_), arcname="build/bin/bbreplay")
            if (ROOT / "build" / "include").is_dir():
                tar.add(str(ROOT / "build" / "include"), arcname="build/include")
        build = buf.getvalue()
    return {
        "trace_name": args.trace.name,
        "trace": args.trace.read_bytes(),
        "backend_name": args.backend.resolve().name if args.backend else None,
        "backend": pack(args.backend, args.backend.resolve().name) if args.backend else None,
        "policy": args.policy.read_bytes() if args.policy else None,
        "build": build,
    }


def die_with_parent():
    """In the child, before exec: killed when the Ray worker that started it dies (a lost task's bbreplay
    must not run on, orphaned)."""
    import ctypes
    import signal
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_part(k, n, data, bbreplay, device, extra, cpus):
    """One part, on a Ray worker: the files written to a fresh folder, bbreplay run there. A bbreplay killed
    by a signal raises (the task is run again: retry_exceptions); one that refused the part (exit 2) is a
    result that says so (running it again would fail the same way)."""
    import subprocess
    with tempfile.TemporaryDirectory(prefix="bbreplay-part-") as tmp:
        tmp = Path(tmp)
        (tmp / data["trace_name"]).write_bytes(data["trace"])
        cmd = [bbreplay, data["trace_name"], "--shard", f"{k}/{n}", "--json", "part.json", "--device", device]
        if data["build"]:
            unpack(data["build"], tmp)
            cmd[0] = str(tmp / "build" / "bin" / "bbreplay")
        if data["backend"]:
            unpack(data["backend"], tmp / "backend")
            cmd += ["--backend", str(Path("backend") / data["backend_name"])]
        if data["policy"]:
            (tmp / "policy.yaml").write_bytes(data["policy"])
            cmd += ["--policy", "policy.yaml"]
        env = dict(os.environ)
        if device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(cpus)
        start = time.monotonic()
        r = subprocess.run(cmd + list(extra), cwd=tmp, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, preexec_fn=die_with_parent)
        tail = (r.stderr or "")[-4000:]
        if r.returncode < 0:
            raise RuntimeError(f"part {k}/{n}: bbreplay was killed by signal {-r.returncode}\n{tail}")
        if r.returncode not in (0, 1) or not (tmp / "part.json").is_file():
            return {"k": k, "failed": f"bbreplay exited {r.returncode}: {tail.strip()}"}
        return {"k": k, "rc": r.returncode, "seconds": time.monotonic() - start,
                "node": os.uname().nodename, "part": (tmp / "part.json").read_bytes()}


def check_reachable(address):
    """A HOST:PORT (or ray://HOST:PORT) that accepts no connection within 10 s is an error at once (ray.init
    would retry for a long while)."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    import socket
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as e:
        raise Usage(f"cannot reach the Ray cluster at {address}: {e.strerror or e}")


def start_ray(args, data):
    import ray
    if args.address:
        check_reachable(args.address)
    size = sum(len(v) for v in data.values() if isinstance(v, bytes))
    try:
        if args.address:
            ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(num_cpus=args.local_cpus or os.cpu_count(), include_dashboard=False, log_to_driver=False,
                     object_store_memory=max(100 << 20, 4 * size))
    except Exception as e:  # ConnectionError, or Ray's own when nothing answers at the address
        raise Usage(f"cannot {'reach the Ray cluster at ' + args.address if args.address else 'start a local Ray'}:"
                    f" {type(e).__name__}: {e}".strip())
    return ray


def run_parts(ray, args, extra, data):
    """Every part's JSON report, by K; raises Usage naming the parts that could not be run."""
    resources = {"num_gpus": 1} if args.device == "cuda" else {"num_cpus": args.cpus_per_part}
    task = ray.remote(max_retries=args.max_retries, retry_exceptions=True, **resources)(run_part)
    data_ref = ray.put(data)
    pending = {task.remote(k, args.parts, data_ref, args.bbreplay, args.device, extra, args.cpus_per_part): k
               for k in range(args.parts)}
    done, failed, start = {}, {}, time.monotonic()
    say(f"{args.parts} parts of {args.trace} on {ray.cluster_resources().get('CPU', 0):g} CPUs, "
        f"{ray.cluster_resources().get('GPU', 0):g} GPUs")
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        k = pending.pop(ready[0])
        try:
            r = ray.get(ready[0])
            if "failed" in r:
                raise RuntimeError(r["failed"])
            done[k] = r["part"]
            say(f"[{len(done) + len(failed)}/{args.parts}] part {k}/{args.parts} done on {r['node']} "
                f"(exit {r['rc']}, {r['seconds']:.1f} s; {time.monotonic() - start:.0f} s in all)")
        except Exception as e:  # the task's own error after its retries, or a lost worker past them
            failed[k] = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            say(f"[{len(done) + len(failed)}/{args.parts}] part {k}/{args.parts} FAILED: {e}")
    if failed:
        raise Usage("parts not run: " + ", ".join(f"{k}/{args.parts} ({why})" for k, why in sorted(failed.items())))
    return done


def merge(args, parts):
    import subprocess
    folder = args.parts_dir or Path(tempfile.mkdtemp(prefix="bbreplay-parts-"))
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for k, text in sorted(parts.items()):
        files.append(folder / f"part-{k}-of-{args.parts}.json")
        files[-1].write_bytes(text)
    cmd = [args.bbreplay, "merge", *map(str, files)]
    for flag in ("json", "csv", "markdown"):
        if getattr(args, flag):
            cmd += [f"--{flag}", str(getattr(args, flag))]
    return subprocess.run(cmd).returncode


def say(text):
    print(f"bbreplay_ray: {text}", file=sys.stderr, flush=True)


def main(argv):
    try:
        args, extra = parse_args(argv)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if not args.address:
            # A local Ray on the loopback address only (Ray's switch for its single-machine mode): nothing
            # outside this machine needs to reach it.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        try:
            import ray  # noqa: F401
        except ImportError:
            raise Usage(f"no ray in {sys.executable}: pip install ray (scripts/setup.sh: bb_install_ray)")
        if not Path(args.bbreplay).is_file() and not args.ship_build and not args.address:
            raise Usage(f"{args.bbreplay}: no bbreplay there (build it, or name it with --bbreplay)")
        data = payload(args)
        ray = start_ray(args, data)
        try:
            parts = run_parts(ray, args, extra, data)
        finally:
            ray.shutdown()
        return merge(args, parts)
    except Usage as e:
        say(str(e))
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
