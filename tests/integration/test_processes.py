"""Several processes never write the same file; forked children never touch the parent's trace."""
import subprocess
import unittest

from support import PYTHON, TempDirTest, base_env, load_trace, preload_env, run, wait_for

HOLD = """
import sys, torch
torch.ones(int(sys.argv[1])) * 2
print("ready", flush=True)
sys.stdin.readline()
"""

FORK = """
import os, torch
torch.ones(3) + 1
pid = os.fork()
if pid == 0:
    torch.ones(11) * 5        # child-only op
    os._exit(0)
os.waitpid(pid, 0)
torch.ones(3) - 1
"""

THREADS_AROUND_FORK = """
import os, sys, torch
def threads():
    return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("Threads:")))
torch.ones(3) + 1
before = threads()
pid = os.fork()
if pid == 0:
    os._exit(0)
after = threads()                  # what Python 3.12 counts to decide whether to warn
os.waitpid(pid, 0)
torch.ones(13) * 2                 # the next op brings the writer thread back
print(before, after, threads(), flush=True)
sys.stdin.readline()
"""

DATALOADER = """
import torch
from torch.utils.data import DataLoader, TensorDataset
ds = TensorDataset(torch.arange(64, dtype=torch.float32).view(32, 2))
total = sum(b[0].sum().item() for b in DataLoader(ds, batch_size=4, num_workers=2))
print(total)
"""


class Processes(TempDirTest):
    def test_two_programs_in_one_folder_write_two_files(self):
        procs = []
        for size in (7, 9):
            p = subprocess.Popen([PYTHON, "-c", HOLD, str(size)], env=preload_env(), cwd=self.dir,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(p.stdout.readline().strip(), "ready")
            procs.append(p)
        errs = []
        for p in procs:
            _, err = p.communicate("\n", timeout=60)
            self.assertEqual(p.returncode, 0, err)
            errs.append(err)
        # The first is silent; the second says once, on stderr, where it writes instead.
        self.assertEqual(errs[0], "")
        self.assertEqual(len(errs[1].splitlines()), 1, errs[1])
        self.assertIn(f"this one writes {self.dir.resolve()}/bbtrace.{procs[1].pid}.yaml", errs[1])
        files = sorted(f.name for f in self.dir.iterdir())
        self.assertEqual(len(files), 2, files)
        self.assertIn("bbtrace.yaml", files)
        self.assertIn(f"bbtrace.{procs[1].pid}.yaml", files)
        sizes = set()
        for f in files:
            t = load_trace(self.dir / f)
            sizes |= {tuple(e["args"][0]["shape"]) for e in t["ops"] if e["op"] == "aten::mul.Tensor"}
        self.assertEqual(sizes, {(7,), (9,)})

    def test_ranks_get_their_own_file(self):
        for rank in (0, 1):
            env = preload_env(RANK=rank, WORLD_SIZE=2)
            r = run([PYTHON, "-c", "import torch; torch.ones(2) + 1"], env, cwd=self.dir)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
        files = sorted(f.name for f in self.dir.iterdir())
        self.assertEqual(files, ["bbtrace.rank0.yaml", "bbtrace.rank1.yaml"])
        self.assertEqual(load_trace(self.dir / files[1])["meta"]["rank"], 1)

    def test_forked_child_does_not_touch_the_parent_trace(self):
        r = run([PYTHON, "-c", FORK], preload_env(), cwd=self.dir)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual([f.name for f in self.dir.iterdir()], ["bbtrace.yaml"])
        t = load_trace(self.dir / "bbtrace.yaml")
        shapes = {tuple(a["shape"]) for e in t["ops"] for a in e["args"][:1] if a["kind"] == "tensor"}
        self.assertIn((3,), shapes)
        self.assertNotIn((11,), shapes)  # the child's op is not in the parent's trace
        self.assertEqual(t["meta"]["status"], "exited")

    def test_no_thread_of_ours_while_forking_and_periodic_writes_resume(self):
        p = subprocess.Popen([PYTHON, "-c", THREADS_AROUND_FORK], env=preload_env(BB_FLUSH_SECONDS=0.1),
                             cwd=self.dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        before, after, later = map(int, p.stdout.readline().split())
        plain = run([PYTHON, "-c", THREADS_AROUND_FORK], base_env(), cwd=self.dir)
        p_before, p_after, p_later = map(int, plain.stdout.split())
        self.assertEqual(before, p_before + 1)  # our writer thread, while the program runs
        self.assertEqual(after, p_after)        # ... was not there at the fork
        self.assertEqual(later, p_later + 1)    # ... and is back after it
        trace = self.dir / "bbtrace.yaml"

        def has_post_fork_op():
            try:
                ops = load_trace(trace)["ops"]
            except (OSError, TypeError):
                return False
            return any(e["op"] == "aten::mul.Tensor" and e["args"][0]["shape"] == [13] for e in ops)
        self.assertTrue(wait_for(has_post_fork_op, timeout=30))  # a periodic write, before exit
        _, err = p.communicate("\n", timeout=60)
        self.assertEqual((p.returncode, err), (0, ""))

    def test_dataloader_workers(self):
        r = run([PYTHON, "-c", DATALOADER], preload_env(), cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), str(float(sum(range(64)))))
        self.assertEqual([f.name for f in self.dir.iterdir()], ["bbtrace.yaml"])
        load_trace(self.dir / "bbtrace.yaml")


if __name__ == "__main__":
    unittest.main()
