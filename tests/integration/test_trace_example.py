"""The example model traced through the preload: every op kind it uses, forward and backward."""
import unittest

import shutil
import tempfile
from pathlib import Path

from support import BBTRACE, EXAMPLE, PYTHON, base_env, load_trace, preload_env, run

FORWARD = ["aten::convolution", "aten::native_batch_norm", "aten::embedding", "aten::_softmax",
           "aten::native_layer_norm", "aten::addmm", "aten::gelu", "aten::_log_softmax",
           "aten::nll_loss_forward"]
BACKWARD = ["aten::convolution_backward", "aten::native_batch_norm_backward", "aten::embedding_dense_backward",
            "aten::_softmax_backward_data", "aten::native_layer_norm_backward", "aten::gelu_backward",
            "aten::_log_softmax_backward_data", "aten::nll_loss_backward", "aten::threshold_backward"]
OPTIMIZER = ["aten::addcdiv_", "aten::lerp_.Scalar", "aten::sqrt"]


class TraceExample(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="bbshim-example-"))
        cls.trace_path = cls.tmp / "t.yaml"
        cls.traced = run([PYTHON, EXAMPLE, "--steps", "2"], preload_env(BB_TRACE=cls.trace_path))
        cls.plain = run([PYTHON, EXAMPLE, "--steps", "2"], base_env())
        cls.trace = load_trace(cls.trace_path)
        cls.ops = {e["op"] for e in cls.trace["ops"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def entries(self, op):
        return [e for e in self.trace["ops"] if e["op"] == op]

    def test_program_runs_as_without_the_preload(self):
        self.assertEqual(self.traced.returncode, 0, self.traced.stderr)
        self.assertEqual(self.traced.stderr, "")  # quiet unless something is wrong
        losses = lambda out: [l for l in out.splitlines() if l.startswith("step")]  # noqa: E731
        self.assertEqual(losses(self.traced.stdout), losses(self.plain.stdout))

    def test_meta(self):
        meta = self.trace["meta"]
        import torch  # the same torch the traced program imported
        self.assertEqual(meta["torch"], torch.__version__)
        self.assertEqual(meta["status"], "exited")
        self.assertIn(str(EXAMPLE), meta["argv"])
        self.assertEqual(meta["calls"], sum(e["count"] for e in self.trace["ops"]))
        self.assertEqual(meta["untraced_calls"], 0)

    def test_forward_backward_and_optimizer_ops_are_all_there(self):
        for op in FORWARD + BACKWARD + OPTIMIZER:
            with self.subTest(op=op):
                self.assertIn(op, self.ops)

    def test_entries_are_consistent(self):
        for e in self.trace["ops"]:
            self.assertGreaterEqual(e["count"], 1)
            self.assertLessEqual(e["nested"], e["count"])
            self.assertLessEqual(e["with_children"], e["count"])
            for a in e["args"]:
                self.assertTrue(a["name"])
                if a["kind"] == "tensor":
                    self.assertEqual(len(a["shape"]), len(a["stride"]))
                    self.assertEqual(a["device"], "cpu")

    def test_index_inputs_carry_value_ranges(self):
        (emb,) = [e for e in self.entries("aten::embedding") if e["args"][1]["dtype"] == "int64"]
        lo, hi = emb["args"][1]["range"]
        self.assertGreaterEqual(lo, 0)
        self.assertLess(hi, emb["args"][0]["shape"][0])  # below the vocabulary size
        for e in self.entries("aten::nll_loss_forward"):
            lo, hi = e["args"][1]["range"]
            self.assertTrue(0 <= lo <= hi < 10, (lo, hi))

    def test_nesting_marks_decompositions(self):
        for e in self.entries("aten::linear"):
            self.assertEqual(e["with_children"], e["count"])   # linear decomposes
        for e in self.entries("aten::addmm"):
            self.assertEqual(e["nested"], e["count"])          # ... into addmm

    def test_summary_command_reads_it(self):
        r = run([BBTRACE, "summary", self.trace_path, "--top", "5", "--signatures", "3"], base_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("top ops by calls", r.stdout)
        self.assertIn("top signatures by calls", r.stdout)
        self.assertIn(f"{self.trace['meta']['calls']} calls", r.stdout)


# Two phases: 1.5 s of one add (stable: sampling starts), then a signature first seen while sampling.
SAMPLED_PROGRAM = """
import time, torch
a = torch.ones(8, 8)
adds = 0
t0 = time.monotonic()
while time.monotonic() - t0 < 1.5:
    for _ in range(100):
        torch.add(a, a)
    adds += 100
c = torch.ones(4, 4)
for _ in range(60000):
    torch.mul(c, c)
print(adds, 60000)
"""


class SampledTracing(unittest.TestCase):
    """BB_TRACE_SAMPLE: once stable, one call in N is traced; the counts are extrapolated and say so."""

    def test_counts_are_extrapolated_from_one_call_in_n_and_marked(self):
        with tempfile.TemporaryDirectory(prefix="bbshim-sampled-") as tmp:
            path = Path(tmp) / "t.yaml"
            r = run([PYTHON, "-c", SAMPLED_PROGRAM], preload_env(BB_TRACE=path, BB_TRACE_SAMPLE=16))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "")
            adds, muls = map(int, r.stdout.split())
            t = load_trace(path)
            tracing = t["meta"]["tracing"]
            self.assertGreaterEqual(tracing["to_sampled"], 1)
            self.assertEqual(tracing["scale"], 16)
            self.assertGreater(tracing["sampled_s"], 0.5)
            self.assertEqual(t["meta"]["calls"], sum(e["count"] for e in t["ops"]))
            self.assertEqual(tracing["calls_seen"], sum(e.get("seen", e["count"]) for e in t["ops"]))

            def entry(op, shape):
                return next(e for e in t["ops"] if e["op"] == op and e["args"][0]["shape"] == shape)
            add, mul = entry("aten::add.Tensor", [8, 8]), entry("aten::mul.Tensor", [4, 4])
            for e, made, within in ((add, adds, 0.05), (mul, muls, 0.1)):
                with self.subTest(op=e["op"]):
                    self.assertLess(e["seen"], e["count"])
                    self.assertLess(abs(e["count"] / made - 1), within, (e["count"], e["seen"], made))
            self.assertLess(mul["seen"], muls / 4)  # one in 16 of them, give or take
            s = run([BBTRACE, "summary", path], base_env())
            self.assertEqual(s.returncode, 0, s.stderr)
            self.assertIn("tracing: sampled, 1 call in 16", s.stdout)
            self.assertIn("~: extrapolated from the calls sampled tracing saw", s.stdout)


if __name__ == "__main__":
    unittest.main()
