"""Isolation (issue 45): kernels that attack bbreplay from inside the kernel's process — its clock, its
GOT, the dispatcher, lazily mapped results, processes left behind to forge the report, native's thread
pool, the input seed, --perf-only — are flagged by name or gain nothing; honest kernels that start a
subprocess, a thread, a library of their own or allocate with malloc pass unflagged and are timed.
CPU only (tests/cheats/README.md lists the cheats; tests/backends/honest_isolation the honest twins).

One attack class is still open within limits: a kernel may take up to the outside clocks' allowance (about
50 us a run of thread CPU) off its own time. tests/cheats/stack_clock_slack does so, unflagged; it is not a
test here (whether such a small theft is seen depends on the machine's noise), and docs/integrity.md gives
its figures. What is tested is the boundary: 120 us taken off a 200 us run is caught. Two attacks found by
the same red-team run are closed: lazy_uffd and lazy_uffd_hidden (userfaultfd is now refused to the
kernel's process by a seccomp filter, and result pages dropped after the clock are seen as it returns), and
predict_inputs under the subreaper as root (the kernel's process now loses its capabilities there)."""
import json
import os
import time
import unittest

from support import BUILD, ROOT, ReplayOfProgram, base_env, run

CHEATS = ROOT / "tests" / "cheats"
HONEST = ROOT / "tests" / "backends" / "honest_isolation"
CPU_REFERENCE = ROOT / "backends" / "cpu_reference"  # the scalar relu the cheats build on, honest
RELU = "aten::relu"
# Both sizes below ATen's parallel grain (32768 elements): native's relu runs on one thread, so that
# its times do not swing with a busy machine's second core.
SMALL = """
import torch
torch.manual_seed(0)
torch.relu(torch.randn(1000))
torch.relu(torch.randn(16384))
"""
BIG = """
import torch
torch.manual_seed(0)
torch.relu(torch.randn(1 << 21))
"""


class IsolationReplay(ReplayOfProgram):
    def replay(self, backend, *args, env=None, out="report.json", timed=True):
        """bbreplay on the class's trace, relu's traced cases on the CPU; (the JSON report, the process)."""
        path = self.dir / out
        mode = ["--repetitions", "6"] if timed else ["--check-only"]
        cmd = [BUILD / "bin" / "bbreplay", self.trace, "--json", path, "--device", "cpu", "--ops", "relu",
               "--variants", "traced", *mode, "--backend", backend, *args]
        r = run(cmd, {**base_env(), **(env or {})}, timeout=300)
        self.assertIn(r.returncode, (0, 1), r.stdout[-3000:] + r.stderr[-3000:])
        return json.loads(path.read_text()), r

    def cases(self, data):
        cases = [c for c in data["cases"] if c["op"] == RELU]
        self.assertTrue(cases, data)
        return cases

    def summary(self, data):
        return {o["op"]: o for o in data["ops"]}[RELU]

    def assert_flagged(self, data, r, flags, every_case=False):
        """Some case (or every one) failed with one of `flags`; the op has no speedup."""
        cases = self.cases(data)
        flagged = [c for c in cases if c["status"] == "failed" and set(flags) & set(c["flags"])]
        self.assertTrue(flagged, [(c["status"], c["flags"], c["message"][:300]) for c in cases])
        if every_case:
            self.assertEqual(len(flagged), len(cases), [(c["status"], c["flags"], c["message"][:300]) for c in cases])
        self.assertEqual(r.returncode, 1, r.stdout[-2000:])
        self.assertIsNone(self.summary(data)["speedup_geomean"], self.summary(data))
        return flagged

    def assert_gains_nothing(self, data):
        """No speedup beyond noise: the op's geometric mean is withheld or below 1.25, and on the larger
        case (a scalar loop against native's vectorized relu) the kernel is not faster than half native."""
        speedup = self.summary(data)["speedup_geomean"]
        self.assertTrue(speedup is None or speedup < 1.25, self.summary(data))
        for c in self.cases(data):
            if c["signature"].startswith("float32[16384]") and c["generated"] and c["native"]:
                self.assertGreater(c["generated"]["median_us"], 0.5 * c["native"]["median_us"], c)

    def assert_honest(self, data, r):
        """Every case passed with no flag and was timed."""
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        for c in self.cases(data):
            self.assertEqual((c["status"], c["flags"]), ("passed", []), c)
            self.assertIsNotNone(c["generated"], c)  # timed, not only checked

    @staticmethod
    def fastest(data, size):
        """The kernel's fastest timed run on the case of `size` elements: a busy machine only adds time,
        so two kernels' fastest runs compare their work where medians swing (under a parallel ctest on the
        2-core VM, medians of one kernel at 24 and 49 ms in two replays, quartiles wider still, 2026-12-07)."""
        (case,) = [c for c in data["cases"] if c["op"] == RELU and c["signature"].startswith(f"float32[{size}]")]
        return case["generated"]["min_us"] if case["generated"] else None


class SmallCheats(IsolationReplay):
    PROGRAM = SMALL

    def test_got_clock_is_timer_tampering_on_every_case(self):
        data, r = self.replay(CHEATS / "got_clock")
        for c in self.assert_flagged(data, r, ["timer-tampering"], every_case=True):
            self.assertIn("GOT", c["message"], c)

    def test_stack_clock_winding_back_most_of_the_run_is_seen_by_the_outside_clocks(self):
        # (it busy-waits 200 us first: 90% of its run is far beyond the outside clocks' allowance)
        data, r = self.replay(CHEATS / "stack_clock")
        for c in self.assert_flagged(data, r, ["timer-tampering"], every_case=True):
            self.assertIn("outside the kernel's process", c["message"], c)

    def test_stack_clock_beyond_the_allowance_is_seen_too(self):
        # 120 us of a 200 us run, about twice the thread-CPU allowance (50 us + 10%): so the allowances cannot
        # grow unnoticed (stack_clock_slack, 40 us a call, stays under them: docs/integrity.md)
        data, r = self.replay(CHEATS / "stack_clock", env={"STACK_CLOCK_THEFT_US": "120"})
        for c in self.assert_flagged(data, r, ["timer-tampering"], every_case=True):
            self.assertIn("outside the kernel's process", c["message"], c)

    def test_seccomp_clock_is_timer_tampering(self):
        # (its 20 us a run is inside the outside clocks' allowance: the filter itself is what is seen)
        data, r = self.replay(CHEATS / "seccomp_clock")
        flagged = self.assert_flagged(data, r, ["timer-tampering"])
        self.assertTrue(any("seccomp filter was installed" in c["message"] for c in flagged),
                        [c["message"][:300] for c in flagged])

    def test_report_rewrite_leaves_a_process_that_is_killed_and_flagged_in_both_isolation_modes(self):
        for mode in ("auto", "subreaper"):
            with self.subTest(isolation=mode):
                out = f"rewrite-{mode}.json"
                data, r = self.replay(CHEATS / "report_rewrite", "--isolation", mode, out=out)
                time.sleep(4)  # (its forger, were it alive, would rewrite the file within a second)
                after = json.loads((self.dir / out).read_text())
                self.assertEqual(after, data)  # bbreplay's own report, as it wrote it
                for c in self.cases(after):
                    self.assertEqual(c["status"], "failed", c)
                    self.assertIn("escaping-work", c["flags"], c)
                    self.assertIn("left 1 process(es) running", c["message"], c)
                self.assertIsNone(self.summary(after)["speedup_geomean"])

    def test_pool_pin_gains_nothing(self):
        data, r = self.replay(CHEATS / "pool_pin")
        self.assert_gains_nothing(data)

    def test_predict_inputs_finds_no_seed_and_gains_nothing(self):
        data, r = self.replay(CHEATS / "predict_inputs", "--seed", "4242")
        self.assertEqual(r.returncode, 0, r.stdout[-2000:])  # (right, and slow)
        self.assert_gains_nothing(data)
        # The control: a seed it can read (here in bbreplay's environment, which the kernel's process
        # inherits) is exploited — its predicted results cost nothing — so the seed's secrecy is what
        # keeps it from winning.
        leaked, _ = self.replay(CHEATS / "predict_inputs", "--seed", "4242", env={"REPLAY_SEED": "4242"},
                                out="leaked.json")
        self.assertLess(self.fastest(leaked, 16384), 0.5 * self.fastest(data, 16384),
                        (self.cases(leaked), self.cases(data)))

    def test_predict_inputs_finds_no_seed_under_the_subreaper_either(self):
        # Under the subreaper, run as root, the kernel's process kept every capability until this was
        # fixed (CapEff 0x1fffeffffff, NoNewPrivs 0): PR_SET_DUMPABLE 0 does not stop CAP_SYS_PTRACE, so it
        # read its parent's memory (process_vm_readv), where the reference's stdin line "<token> <seed>"
        # stays, and predicted every input: relu(16384) in ~25 us where its slow loop takes ~100 us
        # (2026-12-04). Its capabilities are dropped now: it reads nothing of the reference's. With --seed
        # given, bbreplay's own command line (readable in /proc without a PID namespace) would say the
        # seed but for bbreplay blanking its arguments as it starts.
        if os.geteuid() != 0:
            self.skipTest("not root: the kernel's process cannot read the reference's memory")
        data, _ = self.replay(CHEATS / "predict_inputs", "--isolation", "subreaper", "--seed", "4242", out="peek.json")
        blind, _ = self.replay(CHEATS / "predict_inputs", "--seed", "4242", out="blind.json")
        self.assertGreater(self.fastest(data, 16384), 0.5 * self.fastest(blind, 16384),
                           (self.cases(data), self.cases(blind)))

    def test_perf_only_garbage_fails_under_perf_only(self):
        data, r = self.replay(CHEATS / "perf_only_garbage", "--perf-only")
        self.assertEqual(r.returncode, 1, r.stdout[-2000:])
        for c in self.cases(data):
            self.assertEqual(c["status"], "failed", c)
            self.assertIn("elements differ from native", c["message"], c)
        self.assertIsNone(self.summary(data)["speedup_geomean"])
        # (without --perf-only it believes itself fully checked, and is honest)
        data, r = self.replay(CHEATS / "perf_only_garbage", out="checked.json")
        self.assert_honest(data, r)

    def test_python_dispatcher_override_is_flagged(self):
        data, r = self.replay(CHEATS / "python" / "dispatcher_override")
        for c in self.assert_flagged(data, r, ["dispatcher-override"]):
            self.assertIn("aten::relu", c["message"], c)


class DeclinedCalls(IsolationReplay):
    """A backend that overrides ATen's relu at load time and declines every call it is given (int64
    here; tests/cheats/cuda/dispatcher_override does the same to a CPU replay): its cases are flagged by
    name, not skipped, though none of its calls was judged (what loading it did is the backend's)."""
    PROGRAM = """
import torch
torch.manual_seed(0)
torch.relu(torch.randint(-100, 100, (1000,)))
"""

    def test_an_override_at_load_is_flagged_on_cases_the_kernel_declines(self):
        data, r = self.replay(CHEATS / "dispatcher_override", timed=False)
        for c in self.assert_flagged(data, r, ["dispatcher-override"], every_case=True):
            self.assertIn("declined", c["message"], c)

    def test_a_backend_that_only_declines_stays_skipped(self):
        data, r = self.replay(CPU_REFERENCE, timed=False)  # its relu is float32 and float64 only
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
        for c in self.cases(data):
            self.assertEqual((c["status"], c["flags"]), ("skipped", []), c)


class HonestTwins(IsolationReplay):
    PROGRAM = SMALL

    def test_honest_kernels_pass_unflagged_and_are_timed(self):
        for name in ("honest_subprocess", "honest_thread", "honest_library", "honest_malloc", "honest_import"):
            with self.subTest(kernel=name):
                self.assert_honest(*self.replay(HONEST / name))

    def test_a_subprocess_waited_for_is_no_escape_under_the_subreaper(self):
        self.assert_honest(*self.replay(HONEST / "honest_subprocess", "--isolation", "subreaper"))


class LazyResults(IsolationReplay):
    PROGRAM = BIG

    def test_userfaultfd_is_refused_so_lazy_results_are_honest_work(self):
        # Under the subreaper, as root, a full userfaultfd served the reference's process_vm_readv too, so
        # every read agreed: lazy_uffd (userfaultfd closed once every page is real) passed unflagged in 8 of
        # 8 runs, timed 0.2-4 ms where its honest loop takes 9-12 ms; lazy_uffd_hidden (userfaultfd in a
        # thread's private descriptor table, pages dropped again after every full read) every time, at
        # 0.5-1.5 ms (2026-12-04). The kernel's process is now refused userfaultfd (a seccomp filter, before
        # the backend loads), so both fall back to their honest loop: right, unflagged and timed as any
        # kernel. (Were it not refused, result pages missing as the call returns are escaping-work.)
        # Honest work takes the honest loop's time: a lazy result read 0.2-4 ms where it takes 9-12 ms.
        for mode in ("auto", "subreaper"):
            loop, r = self.replay(CPU_REFERENCE, "--isolation", mode, out=f"loop-{mode}.json")
            self.assert_honest(loop, r)
            for cheat in ("lazy_uffd", "lazy_uffd_hidden"):
                with self.subTest(cheat=cheat, isolation=mode):
                    data, r = self.replay(CHEATS / cheat, "--isolation", mode, out=f"{cheat}-{mode}.json")
                    self.assert_honest(data, r)
                    self.assertGreater(self.fastest(data, 1 << 21), 0.5 * self.fastest(loop, 1 << 21),
                                       (self.cases(data), self.cases(loop)))


if __name__ == "__main__":
    unittest.main()
