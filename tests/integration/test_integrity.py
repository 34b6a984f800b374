"""Integrity: every cheating kernel in tests/cheats/ is flagged by bbreplay with its cheat's name, and
honest kernels (native itself, the sample backend) never are. CPU only; the CUDA cheats are in
test_integrity_cuda.py."""
import unittest

from support import ROOT, ReplayOfProgram

CHEATS = ROOT / "tests" / "cheats"
PROGRAM = """
import torch
torch.manual_seed(0)
x = torch.randn(64, 33)
torch.relu(x)
torch.relu(torch.randn(1000))
x.clone()
torch.mul(torch.randn(64, 33), torch.randn(64, 33))
"""

EXPECTED = {  # folder: (op, flag)
    "native_call": ("aten::relu", "native-call"),
    "cached_result": ("aten::relu", "cached-result"),
    "unwritten_output": ("aten::relu", "unwritten-output"),
    "input_mutation": ("aten::relu", "input-mutation"),
    "aliasing": ("aten::clone", "aliasing"),
    "reused_buffer": ("aten::relu", "aliasing"),
    "precision_downgrade": ("aten::mul.Tensor", "precision-downgrade"),
}
TIMED = {"late_replay": ("aten::relu", "cached-result")}  # caught only when the timed loop runs


class Integrity(ReplayOfProgram):
    PROGRAM = PROGRAM

    def replay(self, *args, timed=False):
        mode = ["--repetitions", "6"] if timed else ["--check-only"]
        return super().replay("--device", "cpu", *mode, *args)

    def test_every_cheat_is_flagged_by_name(self):
        cpu_cheats = [p.name for p in CHEATS.iterdir() if p.is_dir() and p.name != "cuda"]  # cuda/: GPU test
        self.assertEqual(sorted({**EXPECTED, **TIMED}), sorted(cpu_cheats))
        for folder, (op, flag) in {**EXPECTED, **TIMED}.items():
            with self.subTest(cheat=folder):
                data, r = self.replay("--backend", CHEATS / folder, "--variants", "traced", timed=folder in TIMED)
                self.assertEqual(r.returncode, 1, r.stdout)
                cases = [c for c in data["cases"] if c["op"] == op]
                self.assertTrue(cases, r.stdout)
                for c in cases:
                    self.assertEqual(c["status"], "failed", c)
                    self.assertIn(flag, c["flags"], c)
                summary = {o["op"]: o for o in data["ops"]}[op]
                self.assertEqual(summary["flagged"], len(cases))
                self.assertIn(flag, summary["flags"])
                self.assertIsNone(summary["speedup_geomean"])  # a flagged case never enters a speedup
                self.assertIn(flag, r.stdout)

    def test_no_kernel_is_given_the_same_inputs_twice(self):
        # A cache keyed on input values (or addresses, or shapes) pays off only where a benchmark
        # repeats its inputs; this relu raises if it ever sees values again, in checks or timed runs.
        data, r = self.replay("--backend", ROOT / "tests" / "backends" / "repeat_alarm", "--variants", "traced",
                              timed=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        relu = [c for c in data["cases"] if c["op"] == "aten::relu"]
        self.assertEqual(len(relu), 2, r.stdout)
        for c in relu:
            self.assertEqual(c["status"], "passed", c)
            self.assertIsNotNone(c["generated"], c)  # timed, not only checked

    def test_native_itself_raises_no_flag(self):
        data, r = self.replay()
        self.assertEqual(r.returncode, 0, r.stdout)
        for c in data["cases"]:
            self.assertEqual(c["flags"], [], c)
            self.assertIn(c["status"], ("passed", "skipped"), c)


if __name__ == "__main__":
    unittest.main()
