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
    "late_native": ("aten::relu", "native-call"),   # honest on its first call only
    "clone_native": ("aten::clone", "native-call"),  # the op itself is never plumbing for its own kernel
    # one memory for every result, mapped at a new address each call: a shared mapping (memfd), seen in
    # the kernel's process's maps on its first call
    "mirror_ring": ("aten::relu", "aliasing"),
}
TIMED = {  # caught only when the timed loop runs
    "late_replay": ("aten::relu", "cached-result"),
    "timed_native": ("aten::relu", "native-call"),  # honest on the checked calls, ATen in warm-ups and timed runs
    # honest on the checked calls too, then cheating in warm-ups and timed runs:
    "late_alias": ("aten::clone", "aliasing"),  # returns its input
    "buffer_ring": ("aten::relu", "aliasing"),  # a ring of three persistent result buffers
    # a fresh result every call, but the previous one (which the caller holds) used as its workspace: seen
    # as that result, read again after the next run, changed
    "scratch_previous": ("aten::relu", "aliasing"),
    "escaping_thread": ("aten::relu", "escaping-work"),  # a worker thread finishes the results after the return
    "late_mutation": ("aten::relu", "input-mutation"),  # computes in its input, then copies out
    # process-wide state changed on its first call, caught at the end of that case (and set back):
    "allocator_swap": ("aten::relu", "environment-tampering"),  # a CPU allocator that slows native's allocations
    "thread_starve": ("aten::relu", "environment-tampering"),  # native left with one intra-op thread
    "copy_hook": ("aten::relu", "environment-tampering"),  # a global callback computes on the harness's copies
}
# Cheats that change process-wide state once: the case of their first call is flagged; bbreplay sets the
# state back, so the later cases run as any kernel does (a flagged case takes the op's speedup away).
# A registration over ATen's relu made on the first call is flagged at the end of that case (native runs in
# another process: it slowed nothing); one made at load time fails every case.
ONCE = {"allocator_swap", "thread_starve", "copy_hook", "late_override"}
EXPECTED["dispatcher_override"] = ("aten::relu", "dispatcher-override")
EXPECTED["late_override"] = ("aten::relu", "dispatcher-override")
# The attacks on the judge's isolation (its clock, its inputs, its reports, results computed when read) are
# tests/integration/test_isolation_cheats.py's.
ISOLATION_CHEATS = {"got_clock", "stack_clock", "stack_clock_slack", "seccomp_clock", "busy_neighbour", "lazy_uffd", "lazy_uffd_hidden", "report_rewrite",
                    "pool_pin", "predict_inputs", "perf_only_garbage"}
# Cheats whose work escapes only when a thread is slower than the call's return: a case whose worker finished
# before the call returned (a tiny relu on a busy 2-core machine) escaped nothing and may pass, but one flagged
# case takes the op's speedup away.
RACY = {"escaping_thread"}
HONEST_FORMS = ROOT / "tests" / "backends" / "honest_forms"


class Integrity(ReplayOfProgram):
    PROGRAM = PROGRAM

    def replay(self, *args, timed=False):
        mode = ["--repetitions", "6"] if timed else ["--check-only"]
        return super().replay("--device", "cpu", *mode, *args)

    def test_every_cheat_is_flagged_by_name(self):
        # cuda/: the GPU test's; python/: Python kernels, test_python_kernels.py's
        cpu_cheats = [p.name for p in CHEATS.iterdir()
                      if p.is_dir() and p.name not in ("cuda", "python") and p.name not in ISOLATION_CHEATS]
        self.assertEqual(sorted({**EXPECTED, **TIMED, "lazy_fault": None}), sorted(cpu_cheats))
        for folder, (op, flag) in {**EXPECTED, **TIMED}.items():
            with self.subTest(cheat=folder):
                data, r = self.replay("--backend", CHEATS / folder, "--variants", "traced", timed=folder in TIMED)
                self.assertEqual(r.returncode, 1, r.stdout)
                cases = [c for c in data["cases"] if c["op"] == op]
                self.assertTrue(cases, r.stdout)
                if folder in RACY or folder in ONCE:
                    cases = [c for c in cases if c["status"] != "passed"]
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

    def test_timed_native_is_honest_when_only_checked(self):
        # (so that the flag above comes from watching the warm-ups and timed runs, not the checks)
        data, r = self.replay("--backend", CHEATS / "timed_native", "--variants", "traced")
        self.assertEqual(r.returncode, 0, r.stdout)
        relu = [c for c in data["cases"] if c["op"] == "aten::relu"]
        self.assertEqual([c["status"] for c in relu], ["passed", "passed"], relu)

    def test_native_itself_raises_no_flag(self):
        data, r = self.replay()
        self.assertEqual(r.returncode, 0, r.stdout)
        for c in data["cases"]:
            self.assertEqual(c["flags"], [], c)
            self.assertIn(c["status"], ("passed", "skipped"), c)
        self.assertGreaterEqual(sum(c["status"] == "passed" for c in data["cases"]), 10, r.stdout)


class HonestForms(ReplayOfProgram):
    """Kernels that write in place, write out=, return a view, or sum in another order than ATen pass
    every check with no flag (tests/backends/honest_forms)."""
    PROGRAM = """
import torch
torch.manual_seed(0)
torch.randn(64, 1000).relu_()
torch.randn(64, 1000).add_(torch.randn(64, 1000))
z = torch.empty(64, 1000)
torch.add(torch.randn(64, 1000), torch.randn(64, 1000), out=z)
torch.randn(64, 33).transpose(0, 1)
torch.randn(64, 4096).sum(dim=1)
torch.relu(torch.randn(65, 33).t())
"""
    OPS = ["aten::relu_", "aten::add_.Tensor", "aten::add.out", "aten::transpose.int", "aten::sum.dim_IntList"]

    def test_in_place_out_and_view_kernels_pass_unflagged_and_are_timed(self):
        data, r = self.replay("--backend", HONEST_FORMS, "--device", "cpu", "--repetitions", "6",
                              "--ops", ",".join(self.OPS))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for c in data["cases"]:
            self.assertEqual(c["flags"], [], c)
            self.assertIn(c["status"], ("passed", "skipped"), c)
        for op in self.OPS:
            with self.subTest(op=op):
                timed = [c for c in data["cases"] if c["op"] == op and c["variant"] == "traced"
                         and c["status"] == "passed" and c["generated"] is not None]
                self.assertTrue(timed, [c for c in data["cases"] if c["op"] == op])

    def test_a_functional_result_in_another_layout_passes_with_a_note_unless_strict(self):
        # backends/cpu_reference's relu returns contiguous results; native keeps a transposed input's layout
        args = ["--backend", ROOT / "backends" / "cpu_reference", "--device", "cpu", "--check-only", "--ops", "relu",
                "--variants", "traced"]
        data, r = self.replay(*args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        (case,) = [c for c in data["cases"] if c["signature"].startswith("float32[33,65]")]
        self.assertEqual((case["status"], case["flags"]), ("passed", []), case)
        self.assertIn("layout differs from native's", case["message"])
        data, r = self.replay(*args, "--strict-strides")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        (case,) = [c for c in data["cases"] if c["signature"].startswith("float32[33,65]")]
        self.assertEqual(case["status"], "failed", case)
        self.assertIn("strides", case["message"])


class LazyResults(ReplayOfProgram):
    """A kernel whose results compute themselves on first access (tests/cheats/lazy_fault: protected pages
    and a SIGSEGV handler) is flagged: a fault-signal handler is process state the kernel changed
    (environment-tampering), and results that are not plain readable memory when the reference reads them
    from outside the kernel's process are work that escaped the call (escaping-work). It gets no speedup."""
    PROGRAM = """
import torch
torch.manual_seed(0)
torch.relu(torch.randn(1 << 21))
"""

    def test_work_deferred_into_the_first_access_of_the_results_is_flagged(self):
        data, r = self.replay("--device", "cpu", "--repetitions", "6", "--variants", "traced",
                              "--backend", CHEATS / "lazy_fault")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        (case,) = [c for c in data["cases"] if c["op"] == "aten::relu"]
        self.assertEqual(case["status"], "failed", case)
        self.assertTrue({"environment-tampering", "escaping-work"} & set(case["flags"]), case)
        # (it was credited 65x on this 2M-element relu when its results were first read after the clock)
        self.assertIsNone({o["op"]: o for o in data["ops"]}["aten::relu"]["speedup_geomean"])


if __name__ == "__main__":
    unittest.main()
