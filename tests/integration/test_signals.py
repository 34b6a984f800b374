"""A program that is interrupted or killed still leaves a valid trace holding what it ran."""
import signal
import subprocess
import unittest

from support import HERE, PYTHON, TempDirTest, load_trace, preload_env, wait_for

LOOP = HERE / "loop_forever.py"


def mul_calls(trace):
    return sum(e["count"] for e in trace["ops"] if e["op"] == "aten::mul.Tensor")


class Signals(TempDirTest):
    def start(self, *args, **bb):
        self.trace = self.dir / "t.yaml"
        env = preload_env(BB_TRACE=self.trace, **bb)
        p = subprocess.Popen([PYTHON, LOOP, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.addCleanup(p.stderr.close)
        self.addCleanup(p.stdout.close)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        self.assertEqual(p.stdout.readline().strip(), "ready")
        return p

    def test_sigterm_writes_the_trace_then_dies_of_sigterm(self):
        p = self.start(BB_FLUSH_SECONDS=0)  # no periodic writes: the signal alone writes
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        self.assertEqual(p.returncode, -signal.SIGTERM)
        t = load_trace(self.trace)
        self.assertEqual(t["meta"]["status"], "signal SIGTERM")
        self.assertGreaterEqual(mul_calls(t), 2000)
        self.assertEqual(p.stderr.read(), "")

    def test_sigint_unhandled_by_the_program(self):
        p = self.start(BB_FLUSH_SECONDS=0)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
        self.assertEqual(p.returncode, -signal.SIGINT)  # Python re-raises an unhandled ^C
        t = load_trace(self.trace)
        self.assertEqual(t["meta"]["status"], "signal SIGINT")
        self.assertGreaterEqual(mul_calls(t), 2000)

    def test_sigint_handled_by_the_program_then_normal_exit(self):
        p = self.start("--catch-sigint", BB_FLUSH_SECONDS=0)
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.stdout.readline().strip(), "interrupted")
        p.wait(timeout=60)
        self.assertEqual(p.returncode, 0)
        t = load_trace(self.trace)
        self.assertEqual(t["meta"]["status"], "exited")
        self.assertTrue(any(e["op"] == "aten::add.Tensor" for e in t["ops"]))  # ran after the signal

    def test_sigkill_leaves_the_last_periodic_write(self):
        p = self.start(BB_FLUSH_SECONDS=0.2)
        self.assertTrue(wait_for(lambda: self.trace.exists()))
        p.kill()
        p.wait(timeout=60)
        t = load_trace(self.trace)
        self.assertEqual(t["meta"]["status"], "running")
        self.assertGreater(mul_calls(t), 0)
        # Killed mid-write, the only possible leftover is the hidden temporary, never a torn t.yaml.
        leftovers = [f.name for f in self.dir.iterdir() if f.name != "t.yaml"]
        self.assertTrue(all(n.startswith(".t.yaml.tmp.") for n in leftovers), leftovers)


if __name__ == "__main__":
    unittest.main()
