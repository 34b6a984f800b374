"""scripts/bbreplay_ray.py on a local Ray of 2 CPUs: the example's trace in 3 parts gives the report of one
run, case by case; a part whose Ray worker is killed mid-run is run again and the merge is complete; a
cluster that does not answer is an error. CPU only; skipped where ray is not installed (scripts/test
installs it: scripts/setup.sh, bb_install_ray)."""
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

from support import BUILD, PYTHON, ROOT, base_env, run, trace_example
from test_shard import OPS, same_run

BBREPLAY = BUILD / "bin" / "bbreplay"
LAUNCHER = ROOT / "scripts" / "bbreplay_ray.py"


def shard_processes(part):
    """(pid, parent pid) of each bbreplay parent process the launcher runs for --shard `part` (its workers
    left out). Only the launcher's, found by their folder (run_part's bbreplay-part-*): integration.shard
    runs `bbreplay --shard 1/3` at the same time, and killing its parent killed that test."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            stat = (d / "stat").read_text()
            cwd = os.readlink(d / "cwd")
        except OSError:
            continue
        if argv[0].endswith(b"bbreplay") and part.encode() in argv and b"--worker" not in argv \
                and Path(cwd).name.startswith("bbreplay-part-"):
            found.append((int(d.name), int(stat.rsplit(")", 1)[1].split()[1])))
    return found


class RayLauncher(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = Path(tempfile.mkdtemp(prefix="bbshim-ray-"))
        cls.trace = trace_example(cls.dir)
        single = cls.dir / "single.json"
        r = run([BBREPLAY, cls.trace, "--device", "cpu", "--check-only", "--ops", OPS, "--json", single], base_env())
        assert r.returncode in (0, 1), r.stderr
        cls.single = json.loads(single.read_text())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def launcher(self, out, *args):
        cmd = [PYTHON, LAUNCHER, self.trace, "--parts", "3", "--device", "cpu", "--local-cpus", "2", "--json", out,
               "--bbreplay", BBREPLAY,
               "--parts-dir", self.dir / out.stem, *args, "--", "--check-only", "--ops", OPS]
        env = base_env()
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        return subprocess.Popen([str(c) for c in cmd], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def finish(self, p, timeout=300):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail("the launcher did not finish:\n" + err)
        self.assertIn(p.returncode, (0, 1), out + err)
        return out, err

    def test_three_parts_on_two_workers_are_the_single_run(self):
        out = self.dir / "ray.json"
        _, err = self.finish(self.launcher(out))
        self.assertEqual(err.count(" done on "), 3, err)  # progress: one line per part
        same_run(self, json.loads(out.read_text()), self.single)

    def test_a_part_whose_worker_is_killed_runs_again(self):
        out = self.dir / "killed.json"
        p = self.launcher(out)
        victim = None
        end = time.monotonic() + 240
        while victim is None and p.poll() is None and time.monotonic() < end:
            procs = shard_processes("1/3")
            victim = procs[0] if procs else None
            time.sleep(0.02)
        self.assertIsNotNone(victim, "part 1/3 was never seen running")
        bbreplay, worker = victim
        os.kill(worker, signal.SIGKILL)  # the Ray worker running the part; its bbreplay dies with it
        _, err = self.finish(p)
        gone = not Path(f"/proc/{bbreplay}").exists() or b"zombie" in Path(f"/proc/{bbreplay}/status").read_bytes()
        self.assertTrue(gone, "the killed task's bbreplay lived on")
        self.assertEqual(err.count(" done on "), 3, err)
        same_run(self, json.loads(out.read_text()), self.single)

    def test_a_cluster_that_does_not_answer_is_an_error(self):
        r = run([PYTHON, LAUNCHER, self.trace, "--parts", "2", "--device", "cpu", "--address", "127.0.0.1:9"],
                base_env(), timeout=300)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("cannot reach the Ray cluster at 127.0.0.1:9", r.stderr)

    def test_bad_settings(self):
        for args, says in ((["--parts", "0"], "--parts 0: at least 1"),
                           (["--parts", "2", "--", "--shard", "0/2"], "--shard is this script's to set")):
            r = run([PYTHON, LAUNCHER, self.trace, "--device", "cpu", *args], base_env())
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(says, r.stderr)


if __name__ == "__main__":
    if subprocess.run([PYTHON, "-c", "import ray"], capture_output=True).returncode != 0:
        print(f"no ray in {PYTHON}: skipped (scripts/test installs it: scripts/setup.sh, bb_install_ray)")
        sys.exit(77)
    unittest.main()
