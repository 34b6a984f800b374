"""Integrity on CUDA: each cheating kernel in tests/cheats/cuda/ is flagged by bbreplay's timed CUDA
replay with its cheat's name; native itself and backends/cuda_example are not; kernels that write outside
their device memory fail (tests/backends/out_of_bounds_cuda). Skipped (exit 77)
where there is no GPU."""
import unittest

from support import ROOT, ReplayOfProgram, skip_unless_cuda

CHEATS = ROOT / "tests" / "cheats" / "cuda"
PROGRAM = """
import torch
torch.manual_seed(0)
torch.relu(torch.randn(1024, 1024, device="cuda"))
a = torch.randn(256, 256, device="cuda")
torch.mm(a, a)
torch.neg(torch.randn(3, 1000, device="cuda"))
torch.cuda.synchronize()
"""

EXPECTED = {  # folder: (op, flag)
    "side_stream": ("aten::relu", "escaping-work"),
    "thread_launch": ("aten::relu", "escaping-work"),
    "l2_tamper": ("aten::relu", "environment-tampering"),
    "library_call": ("aten::mm", "native-call"),
    "unwritten_output": ("aten::relu", "unwritten-output"),
    # the same from memory the allocator takes fresh from the driver (its cache emptied first)
    "unwritten_fresh": ("aten::relu", "unwritten-output"),
    # CUPTI's kernel records switched off around its launch: the launch has no record (H200, 2026-12-04: "CUPTI
    # recorded 0 kernels, copies and sets of the 1 launched"); before that check, impossible-speed caught it
    "blind_profiler": ("aten::relu", "timer-tampering"),
    "timed_native": ("aten::relu", "native-call"),  # ATen only in the warm-ups and timed runs
    "late_alias": ("aten::relu", "aliasing"),  # returns its input in the warm-ups and timed runs
    "buffer_ring": ("aten::relu", "aliasing"),  # a result's memory reused three calls later
    "dispatcher_override": ("aten::relu", "dispatcher-override"),  # ATen's CUDA relu replaced at load time
}


class IntegrityCuda(ReplayOfProgram):
    PROGRAM = PROGRAM

    def replay(self, *args):
        return super().replay("--device", "cuda", "--repetitions", "6", "--variants", "traced", *args, timeout=900)

    def test_every_cuda_cheat_is_flagged_by_name(self):
        self.assertEqual(sorted(EXPECTED), sorted(p.name for p in CHEATS.iterdir() if p.is_dir()))
        for folder, (op, flag) in EXPECTED.items():
            with self.subTest(cheat=folder):
                data, r = self.replay("--backend", CHEATS / folder, "--ops", op)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                cases = [c for c in data["cases"] if c["op"] == op]
                self.assertTrue(cases, r.stdout)
                for c in cases:
                    self.assertEqual(c["status"], "failed", c)
                    self.assertIn(flag, c["flags"], c)
                summary = {o["op"]: o for o in data["ops"]}[op]
                self.assertIsNone(summary["speedup_geomean"])  # flagged: no speedup on any case

    def test_a_kernel_writing_outside_its_device_memory_fails_though_its_results_are_right(self):
        # relu writes one float past its output's end, neg the 16 before its start: writes a few bytes off
        # that no device faults on, seen by the red zones of the kernel's CUDA allocations
        data, r = self.replay("--backend", ROOT / "tests" / "backends" / "out_of_bounds_cuda", "--ops", "relu,neg",
                              "--check-only")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        cases = [c for c in data["cases"] if c["op"] in ("aten::relu", "aten::neg")]
        self.assertEqual({c["op"] for c in cases}, {"aten::relu", "aten::neg"}, r.stdout)
        for c in cases:
            with self.subTest(op=c["op"], signature=c["signature"]):
                self.assertEqual((c["status"], c["flags"]), ("failed", []), c)
                where = "after its end" if c["op"] == "aten::relu" else "before its start"
                self.assertRegex(c["message"], "wrote outside a CUDA allocation of .* " + where, c)

    def test_native_and_the_sample_backend_raise_no_flag_when_timed(self):
        for backend in ([], ["--backend", ROOT / "backends" / "cuda_example"]):
            with self.subTest(backend=backend):
                data, r = self.replay(*backend)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                # the loop below checks nothing on an empty report: some case must have passed and been timed
                self.assertTrue(any(c["status"] == "passed" and c["native"] for c in data["cases"]), r.stdout)
                for c in data["cases"]:
                    self.assertEqual(c["flags"], [], c)
                    if c["status"] != "passed":
                        continue
                    if c["native"] is None:
                        # Only calls that launched nothing when traced (views, empty) may go untimed, and
                        # only because neither side launched device work in the replay either.
                        self.assertIn("no device work", c["message"], c)
                        self.assertEqual(c["traced_device_us"], 0.0, c)
                        continue
                    self.assertGreater(c["native"]["events_median_us"], 0, c)


if __name__ == "__main__":
    skip_unless_cuda()  # exit 77 without an NVIDIA GPU; exit 1 if there is one torch cannot use
    unittest.main()
