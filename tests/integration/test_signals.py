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

    def crash(self, code, **bb):
        self.trace = self.dir / "t.yaml"
        program = "import torch\nfor _ in range(3):\n    torch.mul(torch.ones(4), 2.0)\n" + code
        return subprocess.run([PYTHON, "-c", program], env=preload_env(BB_TRACE=self.trace, **bb),
                              capture_output=True, text=True, timeout=120)

    def test_a_crash_writes_the_trace_then_dies_of_its_signal(self):
        # No periodic writes: the crash alone writes, before the default action kills the process.
        for code, sig in (("import ctypes\nctypes.string_at(0)", signal.SIGSEGV), ("import os\nos.abort()", signal.SIGABRT)):
            with self.subTest(signal=sig.name):
                r = self.crash(code, BB_FLUSH_SECONDS=0)
                self.assertEqual(r.returncode, -sig, r.stderr)
                t = load_trace(self.trace)
                self.assertEqual(t["meta"]["status"], f"signal {sig.name}")
                self.assertEqual(mul_calls(t), 3)

    def test_a_crash_still_reaches_the_programs_own_handler(self):
        r = self.crash("import ctypes, faulthandler\nfaulthandler.enable()\nctypes.string_at(0)", BB_FLUSH_SECONDS=0)
        self.assertEqual(r.returncode, -signal.SIGSEGV)
        self.assertIn("Fatal Python error: Segmentation fault", r.stderr)
        self.assertEqual(load_trace(self.trace)["meta"]["status"], "signal SIGSEGV")

    def test_os_exit_after_a_second_leaves_the_first_periodic_write(self):
        # os._exit runs no exit hook; until the first file is written, the periodic write is tried every
        # second, not every 10 (however long the program took to reach its first op).
        r = self.crash("import os, time\ntime.sleep(1.5)\nos._exit(3)")
        self.assertEqual(r.returncode, 3, r.stderr)
        t = load_trace(self.trace)
        self.assertEqual(t["meta"]["status"], "running")
        self.assertEqual(mul_calls(t), 3)


if __name__ == "__main__":
    unittest.main()
