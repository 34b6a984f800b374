"""Faults around the preload cost the program nothing: one stderr line at most, same results."""
import json
import os
import shutil
import unittest

from support import BBTRACE, BUILD, PYTHON, ROOT, TempDirTest, base_env, preload_env, run

CODE = "import torch; print((torch.ones(4) * 3).sum().item())"


class BadInput(TempDirTest):
    def test_unwritable_trace_path(self):
        r = run([PYTHON, "-c", CODE], preload_env(BB_TRACE="/nonexistent/dir/t.yaml"), cwd=self.dir)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "12.0\n")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("[bbshim] cannot write the trace to /nonexistent/dir/t.yaml"), lines)

    def test_runtime_built_for_another_torch(self):
        fake = self.dir / "lib"
        shutil.copytree(BUILD / "lib", fake)
        (fake / "libbbshim_runtime.torch").write_text("1.13.0\n")
        r = run([PYTHON, "-c", CODE], preload_env(preload=fake / "libbbshim.so"), cwd=self.dir)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "12.0\n")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("built for torch 1.13.0 but this program loaded torch", lines[0])
        self.assertIn("stays inactive", lines[0])
        self.assertFalse((self.dir / "bbtrace.yaml").exists())

    def test_bb_log_info_says_where_it_writes(self):
        r = run([PYTHON, "-c", CODE], preload_env(BB_LOG="info"), cwd=self.dir)
        self.assertEqual((r.returncode, r.stdout), (0, "12.0\n"))
        self.assertRegex(r.stderr, r"^\[bbshim\] tracing torch \S+ ops to .*/bbtrace.yaml\n$")

    def test_bb_log_off_silences_even_warnings(self):
        r = run([PYTHON, "-c", CODE], preload_env(BB_LOG="off", BB_TRACE="/nonexistent/t.yaml"), cwd=self.dir)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "12.0\n", ""))

    def test_invalid_setting_is_reported_once(self):
        r = run([PYTHON, "-c", CODE], preload_env(BB_FLUSH_SECONDS="often"), cwd=self.dir)
        self.assertEqual((r.returncode, r.stdout), (0, "12.0\n"))
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("BB_FLUSH_SECONDS='often'", r.stderr)

    def test_summary_of_a_malformed_trace(self):
        bad = self.dir / "bad.yaml"
        bad.write_text("version: 1\nmeta: {}\nops:\n  - {op: aten::relu, count: many}\n")
        r = run([BBTRACE, "summary", bad], base_env())
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, f"bbtrace: {bad}:4:29: expected a non-negative integer, got 'many'\n")

    def test_convert_to_a_full_device(self):
        # The buffered write failed only at close, unchecked: "wrote /dev/full", exit 0.
        log = ROOT / "tests" / "data" / "replay" / "derived_args.txt"
        for to in ("torchbench", "yaml"):
            with self.subTest(to=to):
                r = run([BBTRACE, "convert", log, "/dev/full", "--to", to], base_env())
                self.assertEqual((r.returncode, r.stderr),
                                 (2, "bbtrace: cannot write /dev/full: No space left on device\n"))

    def test_summary_usage_error(self):
        r = run([BBTRACE, "summary"], base_env())
        self.assertEqual(r.returncode, 2)
        self.assertIn("trace is required", r.stderr)


class InputLimits(TempDirTest):
    """Inputs that crashed, hung or took gigabytes are exit 2 with the file, the limit and the place."""
    NOT_REGULAR = "0:0: not a regular file (a FIFO, a device or a socket cannot be read as input)"
    BOMB = ("4:37: anchors and aliases expand to more values than the file's size allows (an alias bomb?); "
            "write the values out instead")

    def tools(self, path):
        yield "bbtrace", [BBTRACE, "summary", path]
        yield "bbreplay", [BUILD / "bin" / "bbreplay", path, "--device", "cpu", "--check-only"]

    def assert_refused(self, path, says):
        for tool, cmd in self.tools(path):
            with self.subTest(tool=tool, path=str(path)):
                r = run(cmd, base_env(), timeout=60)  # a FIFO blocked forever: TimeoutExpired fails the test
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertEqual(r.stderr, f"{tool}: {path}:{says}\n")

    def test_dev_zero(self):
        # The read never ended: std::bad_alloc, abort.
        self.assert_refused("/dev/zero", self.NOT_REGULAR)

    def test_fifo_does_not_block(self):
        fifo = self.dir / "trace.yaml"
        os.mkfifo(fifo)
        self.assert_refused(fifo, self.NOT_REGULAR)

    def test_larger_than_the_limit(self):
        big = self.dir / "big.yaml"
        with open(big, "wb") as f:
            f.truncate((1 << 30) + 1)  # sparse: no disk, no time
        self.assert_refused(big, "0:0: larger than the input limit of 1 GiB")

    def test_deep_nesting(self):
        # 10,000 brackets overflowed the TorchBench reader's stack (SIGSEGV).
        log = self.dir / "deep.txt"
        log.write_text("Operator: aten.relu.default\ncnt: 1, ((" + "[" * 10000 + "]" * 10000 + ",), {})\n")
        self.assert_refused(log, "2:73: nested deeper than the limit of 64 levels")
        trace = self.dir / "deep.yaml"
        trace.write_text("version: 1\nmeta: {}\nops:\n  - {op: a::b, count: 1, args: "
                         + "[" * 10000 + "]" * 10000 + "}\n")
        self.assert_refused(trace, "4:95: nested deeper than the limit of 64 levels")

    def test_huge_rank(self):
        # An 8 MB log with a 2-million-dimension shape took 2.3 GB.
        ones = ", ".join(["1"] * 2_000_000)
        log = self.dir / "rank.txt"
        log.write_text(f"Operator: aten.relu.default\ncnt: 1, ((T([{ones}], f32),), {{}})\n")
        self.assert_refused(log, "2:206: more than 64 dimensions; the limit is 64")
        # yaml-cpp builds its whole tree before the reader counts (about 450 bytes a value): fewer here.
        ones = ", ".join(["1"] * 100_000)
        trace = self.dir / "rank.yaml"
        trace.write_text("version: 1\nmeta: {}\nops:\n  - op: aten::relu\n    count: 1\n    args:\n"
                         "      - {name: x, kind: tensor, dtype: float32, device: cpu, "
                         f"shape: [{ones}], stride: [{ones}]}}\n")
        self.assert_refused(trace, "7:69: a tensor of 100000 dimensions; the limit is 64")

    def test_alias_bomb(self):
        # Ten lines of nested aliases are 10^20 values: the duplicate-key walk ran until killed.
        lines = ["version: 1", "meta: {}", "ops: []", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 20)]
        for name in ("trace.yaml", "policy.yaml"):
            bomb = self.dir / name
            bomb.write_text("\n".join(lines) + "\n")
            if name == "trace.yaml":
                self.assert_refused(bomb, self.BOMB)
            else:
                log = ROOT / "tests" / "data" / "replay" / "derived_args.txt"
                r = run([BUILD / "bin" / "bbreplay", log, "--device", "cpu", "--check-only", "--policy", bomb],
                        base_env(), timeout=60)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(self.BOMB, r.stderr)

    def test_policy_is_read_with_the_same_limits(self):
        log = ROOT / "tests" / "data" / "replay" / "derived_args.txt"
        r = run([BUILD / "bin" / "bbreplay", log, "--device", "cpu", "--check-only", "--policy", "/dev/zero"],
                base_env(), timeout=60)
        self.assertEqual((r.returncode, r.stderr), (2, f"bbreplay: /dev/zero:{self.NOT_REGULAR}\n"))


class BadReplayOptions(TempDirTest):
    def test_bad_counts_and_seconds_are_usage_errors(self):
        # --repetitions 0 made the self-check segfault; nan, inf and negative seconds timed every case out.
        log = ROOT / "tests" / "data" / "replay" / "derived_args.txt"
        for args in (["--repetitions", "0"], ["--timeout", "nan"], ["--timeout", "inf"], ["--timeout=-1"],
                     ["--budget", "0"], ["--budget", "1e300"]):
            with self.subTest(args=args):
                r = run([BUILD / "bin" / "bbreplay", log, "--device", "cpu", *args], base_env())
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(args[0].split("=")[0], r.stderr)

    def test_parallel_workers_that_would_spoil_timing_are_usage_errors(self):
        log = ROOT / "tests" / "data" / "replay" / "derived_args.txt"
        for args, says in ((["--jobs", "2"], "--check-only"),  # CPU timings side by side measure each other
                           (["--jobs", "0"], "--jobs"),
                           (["--gpus", "0", "--check-only"], "--device cuda"),
                                      (["--precision", "-1"], "--precision"),
                           (["--max-case-bytes", "1X"], "--max-case-bytes"),
                           (["--worker-memory", "-5G"], "--worker-memory")):
            with self.subTest(args=args):
                r = run([BUILD / "bin" / "bbreplay", log, "--device", "cpu", *args], base_env())
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(says, r.stderr)


class MemoryLimits(TempDirTest):
    """Declared sizes are bounded before anything is allocated, and a worker's allocations by its limit."""

    def replay(self, log, *args, expect_rc=0):
        out = self.dir / "report.json"
        r = run([BUILD / "bin" / "bbreplay", log, "--device", "cpu", "--variants", "traced", "--json", out, *args],
                base_env(), timeout=900)
        self.assertEqual(r.returncode, expect_rc, r.stdout + r.stderr)
        return {(c["op"], c["signature"]): c for c in json.loads(out.read_text())["cases"]}

    def test_cases_beyond_the_budget_are_skipped_up_front(self):
        # [1e6, 1e6] attempted an 8 TB allocation in the worker; new_empty makes 4 TB from a 16-byte input.
        log = self.dir / "huge.txt"
        log.write_text("Operator: aten.relu.default\n"
                       "cnt: 1, ((T([1000000, 1000000], f32),), {})\n"
                       "cnt: 1, ((T([64, 64], f32),), {})\n"
                       "Operator: aten.new_empty.default\n"
                       "cnt: 1, ((T([4], f32), [1000000, 1000000]), {})\n")
        cases = self.replay(log, "--check-only")
        # relu has no meta kernel in C++ (torch's is in Python): its result is taken to be as large as its input.
        for key, size in ((("aten::relu", "float32[1000000,1000000]@cuda"), "7.28 TiB"),
                          (("aten::new_empty", "float32[4]@cuda, [1000000,1000000]"), "3.64 TiB")):
            with self.subTest(case=key):
                self.assertEqual(cases[key]["status"], "skipped", cases[key])
                self.assertRegex(cases[key]["message"], rf"^its inputs and results take {size}, more than the "
                                                        r"memory budget of a case \([\d.]+ [KMG]iB; --max-case-bytes\)$")
        self.assertEqual(cases[("aten::relu", "float32[64,64]@cuda")]["status"], "passed")
        # The budget is the option's: 16 KiB of input and 16 KiB of result are beyond 20K, not beyond 40K.
        small = ("aten::relu", "float32[64,64]@cuda")
        self.assertEqual(self.replay(log, "--check-only", "--max-case-bytes", "20K")[small]["status"], "skipped")
        self.assertEqual(self.replay(log, "--check-only", "--max-case-bytes", "40K")[small]["status"], "passed")

    def test_a_kernel_allocating_beyond_the_worker_limit_fails_its_case(self):
        # The kernel takes 2 GiB on every call: with the worker limited to 1 GiB its allocation fails, the
        # case with it, and the run goes on with the next case in a worker that is still alive.
        log = self.dir / "relu.txt"
        log.write_text("Operator: aten.relu.default\n"
                       "cnt: 1, ((T([1000], f32),), {})\ncnt: 1, ((T([2000], f32),), {})\n")
        cases = self.replay(log, "--backend", ROOT / "tests" / "backends" / "memory_hog", "--check-only",
                            "--worker-memory", "1G", expect_rc=1)
        for n in (1000, 2000):
            c = cases[("aten::relu", f"float32[{n}]@cuda")]
            self.assertEqual(c["status"], "failed", c)
            self.assertIn("the kernel raised", c["message"])
            self.assertRegex(c["message"], r"(?i)alloc")
            # and says which limit it met, and what lifts it
            self.assertRegex(c["message"], r"this process may hold [\d.]+ [KMG]iB of host memory: .*--worker-memory")
        # Under a limit it fits, the same kernel passes: the failure was the limit's.
        cases = self.replay(log, "--backend", ROOT / "tests" / "backends" / "memory_hog", "--check-only",
                            "--worker-memory", "6G")
        self.assertEqual({c["status"] for c in cases.values()}, {"passed"})

    def test_a_case_that_runs_out_of_device_memory_runs_once_more_then_is_not_judged(self):
        # The two processes share the device: an out-of-memory error, whoever raised it, gives back what both
        # cached and runs the case again; a second one leaves the case unjudged (skipped, with the message).
        log = self.dir / "oom.txt"
        log.write_text("Operator: aten.relu.default\n"
                       "cnt: 1, ((T([1000], f32),), {})\ncnt: 1, ((T([2000], f32),), {})\n"
                       "Operator: aten.neg.default\n"
                       "cnt: 1, ((T([1000], f32),), {})\n")
        cases = self.replay(log, "--backend", ROOT / "tests" / "backends" / "out_of_memory", "--check-only")
        for n in (1000, 2000):
            c = cases[("aten::relu", f"float32[{n}]@cuda")]
            self.assertEqual((c["status"], c["flags"]), ("passed", []), c)
        c = cases[("aten::neg", "float32[1000]@cuda")]
        self.assertEqual((c["status"], c["flags"]), ("skipped", []), c)
        self.assertRegex(c["message"], r"^not judged: the device ran out of memory twice while judging it, .*"
                                       r"the kernel raised: CUDA out of memory\. Tried to allocate 2\.00 GiB")

    def test_a_case_checked_then_out_of_memory_while_timed_stays_checked_and_says_why_it_has_no_times(self):
        # abs is right on its two checked calls, then raises torch's out-of-memory message on every call:
        # its timing fails, the memory is given back, it fails again; the case is what its checks found.
        log = self.dir / "abs.txt"
        log.write_text("Operator: aten.abs.default\ncnt: 1, ((T([1000], f32),), {})\n")
        cases = self.replay(log, "--backend", ROOT / "tests" / "backends" / "out_of_memory", "--repetitions", "3")
        c = cases[("aten::abs", "float32[1000]@cuda")]
        self.assertEqual((c["status"], c["flags"]), ("passed", []), c)
        self.assertIsNone(c["native"])
        self.assertRegex(c["message"], r"^not timed: the device ran out of memory while timing it: .*"
                                       r"CUDA out of memory\. Tried to allocate 2\.00 GiB")


if __name__ == "__main__":
    unittest.main()
