"""Random ops judged by their properties (docs/replay.md, "Random ops"): native and honest kernels
pass and are timed; dropout kernels with the wrong keep rate, the wrong scale, one mask for every call
or a fixed p fail (tests/backends/random). Every kernel there draws from fixed seeds, and bbreplay's
inputs are seeded: each run is the same run. The checks' false-alarm rate is at most 1e-6 per case."""
import subprocess
import unittest

from support import BBTRACE, ROOT, ReplayOfProgram, base_env, run

RANDOM = ROOT / "tests" / "backends" / "random"
PROGRAM = """
import torch
torch.manual_seed(0)
x = torch.randn(512, 1024)
torch.ops.aten.native_dropout(x, 0.1, True)
torch.empty(512, 1024).bernoulli_(0.3)
torch.empty(16).bernoulli_(0.3)
torch.empty(512, 1024).normal_(1.0, 2.0)
torch.empty(300, 1000).uniform_(-2.0, 3.0)
torch.bernoulli(torch.rand(64, 1024))
torch.relu(x)
"""
JUDGED = ["aten::native_dropout", "aten::bernoulli_.float", "aten::normal_", "aten::uniform_", "aten::bernoulli"]


class RandomOps(ReplayOfProgram):
    PROGRAM = PROGRAM

    def replay(self, *args, timed=False):
        mode = ["--repetitions", "6"] if timed else ["--check-only"]
        return super().replay("--device", "cpu", "--variants", "traced", *mode, *args)

    def cases(self, data, op):
        return [c for c in data["cases"] if c["op"] == op]

    def test_native_passes_judged_statistically(self):
        data, r = self.replay()
        self.assertEqual(r.returncode, 0, r.stdout)
        for op in JUDGED:
            with self.subTest(op=op):
                cases = self.cases(data, op)
                self.assertTrue(cases, r.stdout)
                for c in cases:
                    self.assertEqual(c["status"], "passed", c)
                    self.assertIn("statistically on", c["statistics"], c)
        small = [c for c in self.cases(data, "aten::bernoulli_.float") if "[16]" in c["signature"]]
        self.assertEqual(len(small), 1, data["cases"])
        self.assertIn("the traced 16, enlarged", small[0]["statistics"])
        self.assertIsNone(self.cases(data, "aten::relu")[0]["statistics"])
        self.assertIn("random ops judged by their properties", r.stdout)

    def test_honest_kernels_pass_and_are_timed(self):
        data, r = self.replay("--backend", RANDOM / "honest", timed=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for op in ["aten::native_dropout", "aten::bernoulli_.float", "aten::normal_"]:
            with self.subTest(op=op):
                # (native_dropout on the CPU calls bernoulli_ on a bool tensor: declined by the kernel)
                cases = [c for c in self.cases(data, op) if not c["message"].startswith("declined")]
                self.assertTrue(cases, r.stdout)
                for c in cases:
                    self.assertEqual(c["status"], "passed", c)
                    self.assertEqual(c["flags"], [], c)
                    self.assertIsNotNone(c["generated"], c)
                    self.assertIsNotNone(c["statistics"], c)

    def test_dishonest_dropouts_fail(self):
        expected = {  # backend: (words of the message, flag or None)
            "wrong_rate": ("kept elements:", None),
            "wrong_scale": ("not the input scaled by 1/(1-p)", None),
            "constant_mask": ("identical values", "cached-result"),
            "ignores_p": ("with the parameters changed", None),
        }
        for backend, (words, flag) in expected.items():
            with self.subTest(backend=backend):
                data, r = self.replay("--backend", RANDOM / backend)
                self.assertEqual(r.returncode, 1, r.stdout)
                (c,) = self.cases(data, "aten::native_dropout")
                self.assertEqual(c["status"], "failed", c)
                self.assertIn(words, c["message"])
                if flag:
                    self.assertIn(flag, c["flags"])
                else:
                    self.assertEqual(c["flags"], [], c)

    def test_bbtrace_says_what_a_backend_would_judge(self):
        r = run([BBTRACE, "summary", self.trace, "--backend", RANDOM / "honest"], base_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kernels for 3 ops", r.stdout)
        self.assertIn("would have judged", r.stdout)
        self.assertIn("aten::relu", r.stdout)
        self.assertIn("no kernel in the backend", r.stdout)
        self.assertIn("judged by their properties", r.stdout)
        self.assertIn("aten::native_dropout", r.stdout.split("judged by their properties")[1])


class NativeFailsACheck(ReplayOfProgram):
    # torch's CPU bfloat16 uniform_ draws from its bounds rounded to bfloat16 (-0.3 is -0.30078): its
    # values fail the quantile counts of U(-0.3, 0.7). A check native fails itself is not held against
    # the kernel: the case is not judged (skipped, saying why), neither failed nor passed.
    PROGRAM = """
import torch
torch.manual_seed(0)
torch.empty(300, 1000, dtype=torch.bfloat16).uniform_(-0.3, 0.7)
torch.empty(300, 1000).uniform_(-0.3, 0.7)
"""

    def test_a_check_native_fails_itself_judges_nothing(self):
        data, r = self.replay("--device", "cpu", "--variants", "traced", "--check-only")
        self.assertEqual(r.returncode, 0, r.stdout)
        by = {c["signature"].split("[")[0]: c for c in data["cases"] if c["op"] == "aten::uniform_"}
        self.assertEqual(sorted(by), ["bfloat16", "float32"], r.stdout)
        self.assertEqual(by["float32"]["status"], "passed", by["float32"])
        self.assertEqual(by["bfloat16"]["status"], "skipped", by["bfloat16"])
        self.assertIn("native's own values fail the same check (values below", by["bfloat16"]["message"])


if __name__ == "__main__":
    unittest.main()
