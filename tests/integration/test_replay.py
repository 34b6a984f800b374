"""bbreplay: the self-check, the sample backend, every way a kernel can go wrong, op selection, bad
input, TorchBench logs and the report files. CPU only (the CUDA path runs in scripts/gpu-check)."""
import json
import os
import re
import unittest

from support import BUILD, PYTHON, ROOT, TempDirTest, base_env, preload_env, run, trace_example

BBREPLAY = BUILD / "bin" / "bbreplay"
BEHAVIOURS = ROOT / "tests" / "backends" / "behaviours"
TORCHBENCH = ROOT / "tests" / "data" / "torchbench" / "GPT2ForSequenceClassification_training.txt"

# Every op of tests/backends/behaviours, with the shapes that trigger each behaviour.
BEHAVIOUR_PROGRAM = """
import torch
torch.manual_seed(0)
for n in (100, 7):
    torch.relu(torch.randn(n))
torch.nn.functional.leaky_relu(torch.randn(5))
torch.relu_(torch.randn(5))
torch.neg(torch.randn(10))
torch.sigmoid(torch.randn(10))
torch.abs(torch.randn(10))
for n in (13, 20):
    torch.tanh(torch.randn(n))
torch.exp(torch.randn(10))
torch.sin(torch.randn(17))
"""


def replay(*args, timeout=900):
    return run([BBREPLAY, *args], base_env(), timeout=timeout)


class Replay(TempDirTest):
    trace = None

    @classmethod
    def setUpClass(cls):
        import tempfile
        from pathlib import Path
        cls.shared = Path(tempfile.mkdtemp(prefix="bbshim-replay-"))
        cls.trace = trace_example(cls.shared)
        cls.behaviour_trace = cls.shared / "behaviours.yaml"
        r = run([PYTHON, "-c", BEHAVIOUR_PROGRAM], preload_env(BB_TRACE=cls.behaviour_trace), cwd=cls.shared)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.shared, ignore_errors=True)

    def report(self, *args, expect_rc=0, timeout=900):
        out = self.dir / "report.json"
        r = replay(*args, "--device", "cpu", "--json", out, timeout=timeout)
        self.assertEqual(r.returncode, expect_rc, r.stdout + r.stderr)
        data = json.loads(out.read_text())
        self.assertEqual(data["schema"], "bbreplay-report")
        return data, r

    def cases(self, data, op):
        return [c for c in data["cases"] if c["op"] == op]

    def test_a_backend_named_by_the_policy_is_said_loudly(self):
        # A policy file reads like data; its backend: key makes bbreplay compile and run code.
        policy = self.dir / "policy.yaml"
        policy.write_text(f"version: 1\nbackend: {ROOT / 'backends' / 'cpu_reference'}\nops:\n  aten::relu: {{}}\n")
        data, r = self.report(self.trace, "--policy", policy, "--ops", "relu", "--check-only")
        self.assertIn(f"bbreplay: the policy {policy} names the backend", r.stderr)
        self.assertTrue(any(c["status"] == "passed" for c in data["cases"]), r.stdout)
        data, r = self.report(self.trace, "--policy", policy, "--backend", ROOT / "backends" / "cpu_reference",
                              "--ops", "relu", "--check-only")
        self.assertNotIn("names the backend", r.stderr)

    def test_native_against_native_passes_every_case_it_can_rebuild(self):
        data, r = self.report(self.trace, "--check-only")
        statuses = {c["status"] for c in data["cases"]}
        self.assertLessEqual(statuses, {"passed", "skipped"}, r.stdout)
        for c in data["cases"]:  # the integrity checks run on native too, and must not accuse it
            self.assertEqual(c["flags"], [], c)
        skipped = [c for c in data["cases"] if c["status"] == "skipped"]
        for c in skipped:  # only random ops may be left out, and they say so
            self.assertIn("random op", c["message"], c)
        self.assertGreater(sum(c["status"] == "passed" for c in data["cases"]), 500)
        self.assertIn("native (self-check", data["meta"]["backend"])
        # every traced signature is in the report
        traced = sum(1 for c in data["cases"] if c["variant"] == "traced")
        import yaml
        trace = yaml.safe_load(self.trace.read_text())
        self.assertEqual(traced, len(trace["ops"]))
        # coverage: every call of the trace is counted once, judged or not judged with a reason
        cov = data["coverage"]
        self.assertEqual(cov["calls"], sum(e["count"] for e in trace["ops"]))
        self.assertEqual(cov["judged_calls"] + sum(n["calls"] for n in cov["not_judged"]), cov["calls"])
        self.assertTrue(all(n["reason"].startswith("random op") for n in cov["not_judged"]), cov["not_judged"])
        self.assertRegex(r.stdout, r"(?m)^judged \d+\.\d% of the traced calls")
        # with --ops, the rest of the trace is not judged and says why
        part, _ = self.report(self.trace, "--check-only", "--ops", "relu")
        self.assertIn("not selected by --ops", {n["reason"] for n in part["coverage"]["not_judged"]})
        self.assertEqual(part["coverage"]["calls"], cov["calls"])
        self.assertLess(part["coverage"]["judged_calls"], cov["judged_calls"])

    def test_the_sample_backend_passes_and_is_timed(self):
        data, r = self.report(self.trace, "--backend", ROOT / "backends" / "cpu_reference", "--repetitions", "5")
        ops = {o["op"]: o for o in data["ops"]}
        for op in ("aten::relu", "aten::addmm", "aten::native_layer_norm", "aten::_softmax", "aten::sum.dim_IntList",
                   "aten::threshold_backward", "aten::gelu", "aten::gelu_backward"):
            self.assertIn(op, ops, r.stdout)
            self.assertGreater(ops[op]["passed"], 0, op)
            self.assertEqual(ops[op]["failed"] + ops[op]["crashed"], 0, op)
            if ops[op]["speedup_geomean"] is None:  # withheld only where every timed case was unstable, said so
                self.assertGreater(ops[op]["unstable"], 0, ops[op])
                self.assertIn("unstable", ops[op]["speedup_withheld"])
            else:
                self.assertGreater(ops[op]["speedup_geomean"], 0, op)
        for c in data["cases"]:
            self.assertEqual(c["flags"], [], c)  # an honest backend raises no integrity flag
            if c["variant"] == "traced" and c["status"] == "passed":
                self.assertGreater(c["native"]["median_us"], 0, c)
                self.assertGreater(c["generated"]["median_us"], 0, c)
            if c["variant"] != "traced":
                self.assertIsNone(c["native"], c)  # variants are checked, not timed
        # the table says what the JSON says: a speedup, or that it was withheld
        shown = r"[\d.]+\s+[\d.]+\s+[\d.]+x" if ops["aten::relu"]["speedup_geomean"] is not None else r"-\s+-\s+-"
        self.assertRegex(r.stdout, r"(?m)^aten::relu\s+\d+\s+\d+\s+0\s+0\s+0\s+" + shown)
        # a busy machine may leave some ops untimed, but not the sample backend as a whole
        self.assertTrue(any(o["speedup_geomean"] is not None for o in ops.values()), r.stdout)

    def test_a_profile_by_place_names_each_process_lines(self):
        # BB_REPLAY_PROFILE: every process that judged writes its places (the kernel's process too, from its
        # namespace), and the reference charges what the kernel's process reported to "remote" places.
        prefix = self.dir / "profile" / "p"
        prefix.parent.mkdir()
        out = self.dir / "report.json"
        env = dict(base_env(), BB_REPLAY_PROFILE=str(prefix))
        r = run([BBREPLAY, self.trace, "--device", "cpu", "--json", out, "--ops", "relu", "--repetitions", "3",
                 "--backend", ROOT / "backends" / "cpu_reference"], env, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        files = sorted(prefix.parent.glob("p.*-*.tsv"))
        self.assertGreaterEqual(len(files), 2, files)  # the reference worker's and the kernel's process's
        rows = {}
        for f in files:
            lines = f.read_text().splitlines()
            self.assertEqual(lines[0], "what\tfile\tline\tcount\tseconds", f)
            for line in lines[1:]:
                what, where, at, count, seconds = line.split("\t")
                self.assertGreater(int(count), 0, line)
                self.assertGreaterEqual(float(seconds), 0, line)
                rows.setdefault(f.name, set()).add((what, where))
        everything = set().union(*rows.values())
        self.assertIn(("timed runs", "case_timing.cpp"), everything)  # native's timed runs, in the reference
        self.assertTrue(any(w.startswith("remote ") for w, _ in everything), everything)
        self.assertTrue(any(where == "kernel_worker.cpp" for _, where in everything), everything)  # its own file

    def test_parallel_workers_give_the_report_one_worker_gives(self):
        one, r1 = self.report(self.trace, "--check-only")
        two, r2 = self.report(self.trace, "--check-only", "--jobs", "2", "--quiet")
        # progress on a stderr that is not a terminal: a plain line at the start (then every 10 s); none with --quiet
        progress = r"(?m)^bbreplay: \d+/\d+ cases, \d+:\d\d spent"
        self.assertRegex(r1.stderr, r"(?m)^bbreplay: 0/\d+ cases, 0:00 spent; aten::")
        self.assertNotRegex(r2.stderr, progress)

        def key(c):
            return (c["op"], c["signature"], c["variant"], c["status"], c["flags"], c["message"],
                    c["max_abs_error"], c["max_rel_error"])
        self.assertGreater(len(one["cases"]), 500)
        self.assertEqual([key(c) for c in one["cases"]], [key(c) for c in two["cases"]])  # same cases, same order
        self.assertIn("2 workers at once", two["meta"]["timing"])

    def test_an_interrupted_replay_writes_what_it_has_and_fails(self):
        import signal
        import subprocess
        out = self.dir / "partial.json"
        p = subprocess.Popen([str(BBREPLAY), str(self.trace), "--device", "cpu", "--check-only", "--json", str(out),
                              "--progress-every", "0"],
                             env=base_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        # (non-terminal stderr with --progress-every 0: a plain line before every case; wait for a few cases)
        for line in p.stderr:
            m = re.match(r"bbreplay: (\d+)/(\d+) cases, \d+:\d\d spent", line)
            if m and int(m.group(1)) >= 5:
                break
        os.killpg(p.pid, signal.SIGINT)  # as Ctrl-C does: to the whole group, workers included
        stdout, stderr = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 1, stdout + stderr)
        data = json.loads(out.read_text())
        done = len(data["cases"])
        self.assertRegex(data["meta"]["interrupted"], rf"^stopped by INT after {done} of \d+ cases")
        total = int(re.search(r"of (\d+) cases", data["meta"]["interrupted"]).group(1))
        self.assertTrue(0 < done < total, data["meta"]["interrupted"])
        self.assertIn("INTERRUPTED: stopped by INT", stdout)
        # no case was charged for the interruption: the workers ignore SIGINT, bbreplay stops them
        self.assertEqual({c["status"] for c in data["cases"]} - {"passed", "skipped"}, set(), stdout)
        self.assertFalse(any(c["status"] == "crashed" for c in data["cases"]))
        # and no worker of this run is left (workers lead process groups of their own)
        left = subprocess.run(["pgrep", "-f", f"{self.trace} .*--worker"], capture_output=True, text=True)
        self.assertEqual(left.stdout, "")

    def test_each_kind_of_bad_kernel_is_reported_and_the_run_goes_on(self):
        data, r = self.report(self.behaviour_trace, "--backend", BEHAVIOURS, "--variants", "traced",
                              "--timeout", "20", expect_rc=1)
        by = {(c["op"], c["signature"]): c for c in data["cases"]}

        def case(op, n):
            return by[(op, f"float32[{n}]")]
        self.assertEqual(case("aten::relu", 100)["status"], "failed")  # watermark 42
        self.assertIn("elements differ", case("aten::relu", 100)["message"])
        self.assertEqual(case("aten::relu", 7)["status"], "skipped")
        self.assertIn("declined", case("aten::relu", 7)["message"])
        self.assertIn("the kernel raised", case("aten::neg", 10)["message"])
        self.assertEqual(case("aten::sigmoid", 10)["flags"], ["native-call"])
        self.assertIn("aten::sigmoid", case("aten::sigmoid", 10)["message"])
        self.assertEqual(case("aten::abs", 10)["flags"], ["native-call"])
        self.assertEqual(case("aten::tanh", 13)["status"], "crashed")
        self.assertIn("SEGV", case("aten::tanh", 13)["message"])
        self.assertEqual(case("aten::tanh", 20)["status"], "failed")  # a fresh worker went on
        exp = case("aten::exp", 10)  # 0.1% off: a plain failure, not a precision downgrade
        self.assertEqual((exp["status"], exp["flags"]), ("failed", []), exp)
        self.assertIn("elements differ", exp["message"])
        self.assertEqual(case("aten::sin", 17)["status"], "timeout")
        # ops the backend has no kernel for are not replayed unless asked for
        self.assertNotIn("aten::leaky_relu", {c["op"] for c in data["cases"]})
        self.assertIn("cases that did not pass", r.stdout)

    def test_a_kernel_that_overflows_on_large_finite_inputs_fails_there_only(self):
        data, r = self.report(self.behaviour_trace, "--backend", ROOT / "tests" / "backends" / "overflowing",
                              "--check-only", expect_rc=1)
        tanh = self.cases(data, "aten::tanh")
        self.assertEqual({c["variant"] for c in tanh},
                         {"traced", "noncontiguous", "special-values", "large-values", "empty", "scalar", "odd-size"})
        for c in tanh:
            with self.subTest(signature=c["signature"], variant=c["variant"]):
                if c["variant"] == "large-values":
                    self.assertEqual((c["status"], c["flags"]), ("failed", []), c)  # wrong, not a cheat
                    self.assertIn("elements differ", c["message"])
                else:
                    self.assertEqual(c["status"], "passed", c)

    def test_a_kernel_writing_to_the_result_pipe_forges_nothing(self):
        # it writes a "passed" result and a note that native runs to every descriptor, then crashes
        data, r = self.report(self.behaviour_trace, "--backend", ROOT / "tests" / "backends" / "protocol_forger",
                              "--variants", "traced", "--check-only", expect_rc=1)
        cases = [c for c in data["cases"] if c["op"] == "aten::relu"]
        self.assertEqual(len(cases), 2, r.stdout)
        for c in cases:
            self.assertEqual(c["status"], "crashed", c)  # not passed, not invalid
            # (what it wrote to its channel to the reference worker is a malformed message, or it died first)
            self.assertRegex(c["message"], "SEGV|sent what no bbreplay worker sends", c)

    def test_ops_select_overloads_exactly(self):
        def listed(ops):
            r = replay(self.behaviour_trace, "--ops", ops, "--list", "--device", "cpu")
            self.assertEqual(r.returncode, 0, r.stderr)
            return {line.split()[0] for line in r.stdout.splitlines()}
        self.assertEqual(listed("relu"), {"aten::relu"})
        self.assertEqual(listed("relu_"), {"aten::relu_"})
        self.assertEqual(listed("aten::*relu*"), {"aten::relu", "aten::relu_", "aten::leaky_relu"})
        self.assertEqual(listed("neg,tanh"), {"aten::neg", "aten::tanh"})
        r = replay(self.behaviour_trace, "--ops", "nosuchop", "--device", "cpu")
        self.assertEqual(r.returncode, 2)
        self.assertIn("matches no op of the trace", r.stderr)

    def test_a_malformed_trace_is_an_error_with_its_position(self):
        bad = self.dir / "bad.yaml"
        bad.write_text("version: 1\nops:\n  - op: aten::relu\n    count: [1\n")
        r = replay(bad)
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, re.escape(str(bad)) + r":\d+:\d+: ")
        log = self.dir / "bad.txt"
        log.write_text("Operator: aten.relu.default\ncnt: 1, ((T([4], f32),), {}\n")
        r = replay(log)
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, re.escape(str(log)) + r":2:\d+: ")

    def test_an_op_that_cannot_be_rebuilt_is_skipped_and_the_rest_runs(self):
        t = self.dir / "t.yaml"
        t.write_text("version: 1\nmeta: {}\nops:\n"
                     "  - op: aten::no_such_op\n    count: 1\n    args: []\n"
                     "  - op: aten::relu\n    count: 2\n    args:\n"
                     "      - {name: self, type: Tensor, kind: tensor, dtype: float32, shape: [4, 5], stride: [5, 1], "
                     "device: cpu}\n")
        data, r = self.report(t, "--check-only")
        by = {c["op"]: c for c in data["cases"] if c["variant"] == "traced"}
        self.assertEqual(by["aten::no_such_op"]["status"], "skipped")
        self.assertIn("unknown op", by["aten::no_such_op"]["message"])
        self.assertEqual(by["aten::relu"]["status"], "passed")

    def test_torchbench_logs_replay_index_ops_with_valid_indices(self):
        data, r = self.report(TORCHBENCH, "--check-only", "--ops", "embedding,nll_loss_forward,index.Tensor")
        self.assertEqual({c["op"] for c in data["cases"]},
                         {"aten::embedding", "aten::nll_loss_forward", "aten::index.Tensor"})
        for c in data["cases"]:
            self.assertEqual(c["status"], "passed", c)

    def test_a_kernel_writing_outside_its_memory_fails_though_its_results_are_right(self):
        # relu writes one float past its output's end, neg the 16 before its start
        data, r = self.report(self.behaviour_trace, "--backend", ROOT / "tests" / "backends" / "out_of_bounds",
                              "--check-only", expect_rc=1)
        cases = [c for c in data["cases"] if c["op"] in ("aten::relu", "aten::neg")]
        self.assertEqual({c["op"] for c in cases}, {"aten::relu", "aten::neg"}, r.stdout)
        for c in cases:
            with self.subTest(op=c["op"], signature=c["signature"], variant=c["variant"]):
                if c["variant"] == "empty":  # (no memory of its own at all: the write crashes it)
                    self.assertEqual(c["status"], "crashed", c)
                    continue
                self.assertEqual((c["status"], c["flags"]), ("failed", []), c)
                where = "after its end" if c["op"] == "aten::relu" else "before its start"
                self.assertRegex(c["message"], "wrote outside an allocation of .* " + where, c)

    def test_a_loss_whose_program_ignored_targets_is_judged_on_ignored_targets(self):
        # GPT-2's trace passed ignore_index (-100) among its targets (range [-100, 983]), BERT's did not
        # ([10, 999]); the kernel indexes an ignored target from the end of the row instead of skipping it.
        models = ROOT / "tests" / "data" / "models"
        wrong = ROOT / "tests" / "backends" / "ignore_index"
        for trace, traced_fails in ((models / "gpt2.yaml", True), (models / "bert.yaml", False)):
            with self.subTest(trace=trace.name):
                data, r = self.report(trace, "--backend", wrong, "--ops", "nll_loss_backward", "--variants",
                                      "traced,special-values", "--check-only", expect_rc=1)
                by = {c["variant"]: c for c in data["cases"]}
                self.assertEqual(set(by), {"traced", "special-values"}, r.stdout)
                self.assertEqual(by["special-values"]["status"], "failed", by["special-values"])
                self.assertIn("elements differ", by["special-values"]["message"])
                self.assertEqual(by["traced"]["status"], "failed" if traced_fails else "passed", by["traced"])
        # native against native on the same cases: the ignored targets and the derived total_weight are
        # inputs native takes
        data, r = self.report(models / "gpt2.yaml", "--ops", "nll_loss_forward,nll_loss_backward", "--check-only")
        self.assertTrue(data["cases"])
        for c in data["cases"]:
            self.assertIn(c["status"], ("passed", "skipped"), c)

    def test_a_written_policy_routes_what_passed_and_no_more(self):
        python_kernels = ROOT / "tests" / "backends" / "python"
        policy = self.dir / "earned.yaml"
        data, r = self.report(self.behaviour_trace, "--backend", python_kernels, "--ops", "relu,neg,exp,abs",
                              "--variants", "traced", "--repetitions", "5", "--write-policy", policy, expect_rc=1)
        text = policy.read_text()
        # relu passed both its cases; neg and abs called ATen, exp raised: named in the comment, not routed
        self.assertRegex(text, r"(?m)^ops:\n  # 2 of 2 cases passed.*\n  aten::relu: \{\}\n\Z", text)
        self.assertRegex(text, r"(?m)^#   aten::neg: 0 of 1 cases passed, 1 failed, 1 flagged; flagged native-call$")
        self.assertRegex(text, r"(?m)^#   aten::exp: .*the kernel raised: RuntimeError: exp kernel failed on purpose")
        self.assertIn("aten::abs", text)
        self.assertIn(f'backend: "{python_kernels}"', text)
        # in the preload it routes relu and nothing else
        summary = self.dir / "summary.txt"
        r = run([PYTHON, "-c", BEHAVIOUR_PROGRAM], preload_env(BB_POLICY=policy, BB_SUMMARY=summary), cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        routed = re.findall(r"(?m)^  (aten::\S+)\s+route\s+(\d+)\s+(\d+)", summary.read_text())
        self.assertEqual(routed, [("aten::relu", "2", "2")], summary.read_text())
        # a least speedup nothing in Python reaches routes nothing, and says why
        slow = self.dir / "fast-only.yaml"
        self.report(self.behaviour_trace, "--backend", python_kernels, "--ops", "relu", "--variants", "traced",
                    "--repetitions", "5", "--write-policy", slow, "--min-speedup", "1000")
        self.assertRegex(slow.read_text(), r"(?m)^#   aten::relu: 2 of 2 cases passed; (.*under 1000\.00x|no speedup)")
        self.assertTrue(slow.read_text().endswith("ops: {}\n"), slow.read_text())
        # judged under a policy, an op keeps its entry as written there: no call beyond its conditions is routed
        judging = self.dir / "judging.yaml"
        judging.write_text("version: 1\nops:\n  aten::relu: {when: {numel: [1, 50]}}\n")
        narrowed = self.dir / "narrowed.yaml"
        self.report(self.behaviour_trace, "--backend", python_kernels, "--policy", judging, "--ops", "relu",
                    "--variants", "traced", "--repetitions", "5", "--write-policy", narrowed)
        self.assertIn("aten::relu: {when: {numel: [1, 50]}}", narrowed.read_text())
        # a self-check earns no routing
        r = replay(self.behaviour_trace, "--device", "cpu", "--write-policy", self.dir / "none.yaml")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--write-policy needs a backend", r.stderr)

    def test_every_report_format_is_written(self):
        csv, md = self.dir / "r.csv", self.dir / "r.md"
        data, r = self.report(self.behaviour_trace, "--ops", "relu,exp", "--csv", csv, "--markdown", md,
                              "--repetitions", "5")
        self.assertEqual(data["schema_version"], 2)
        self.assertTrue(csv.read_text().startswith("schema_version,op,signature,"))
        self.assertTrue(csv.read_text().splitlines()[1].startswith("2,aten::"))
        self.assertIn("bbreplay-report schema 2", md.read_text())

    def test_help_documents_every_flag(self):
        r = replay("--help")
        self.assertEqual(r.returncode, 0)
        for flag in ("--backend", "--policy", "--ops", "--device", "--seed", "--variants", "--check-only",
                     "--perf-only", "--repetitions", "--precision", "--budget", "--timeout", "--json", "--csv",
                     "--markdown", "--list"):
            self.assertIn(flag, r.stdout)
        # docs/replay.md's usage block names exactly the flags --help lists
        usage = (ROOT / "docs" / "replay.md").read_text().split("```")[1]
        documented = set(re.findall(r"--[a-z][a-z-]*", usage))
        helped = set(re.findall(r"(?m)^\s+(--[a-z][a-z-]*)", r.stdout)) - {"--help"}
        self.assertEqual(documented, helped)


if __name__ == "__main__":
    unittest.main()
