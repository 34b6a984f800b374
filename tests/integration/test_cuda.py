"""On a CUDA machine: the example traced on the GPU. Skipped (exit 77) where there is no GPU."""
import unittest

from support import (BUILD, EXAMPLE, HERE, PYTHON, ROOT, TempDirTest, base_env, load_trace, preload_env, run,
                     skip_unless_cuda)
from test_profiler_oracle import profile_and_trace

GRAPH = """
import torch
w = torch.randn(100, 8, device="cuda")
idx = torch.randint(0, 100, (4, 5), device="cuda")
torch.embedding(w, idx)                      # first call: sampled for its value range
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        torch.embedding(w, idx)              # call 2 and 4 are sampled again: outside the capture
    with torch.cuda.graph(g):
        out = torch.embedding(w, idx)        # call 5..: captured, must not be disturbed
g.replay()
torch.cuda.synchronize()
print(bool((out == w[idx]).all()))
"""


class Cuda(TempDirTest):
    def test_example_on_cuda(self):
        path = self.dir / "t.yaml"
        r = run([PYTHON, EXAMPLE, "--device", "cuda", "--steps", "3"], preload_env(BB_TRACE=path))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        t = load_trace(path)
        (dev,) = t["meta"]["devices"]
        self.assertEqual(dev["device"], "cuda:0")
        self.assertTrue(dev["name"].startswith("NVIDIA"), dev)
        devices = {a["device"] for e in t["ops"] for a in e["args"] if a["kind"] == "tensor"}
        self.assertIn("cuda:0", devices)
        (emb,) = [e for e in t["ops"] if e["op"] == "aten::embedding"]
        idx = emb["args"][1]
        self.assertEqual((idx["device"], idx["dtype"]), ("cuda:0", "int64"))
        lo, hi = idx["range"]  # sampled on the GPU without a synchronization
        self.assertTrue(0 <= lo <= hi < 1000, (lo, hi))

    def test_replay_spread_over_the_gpus_gives_the_report_of_one(self):
        import json
        path = self.dir / "t.yaml"
        r = run([PYTHON, EXAMPLE, "--device", "cuda", "--steps", "1"], preload_env(BB_TRACE=path))
        self.assertEqual(r.returncode, 0, r.stderr)
        bbreplay = BUILD / "bin" / "bbreplay"
        ops = "aten::addmm,aten::relu,aten::native_layer_norm,aten::sum.dim_IntList"
        reports = []
        for extra in ([], ["--gpus", "all"], ["--gpus", "0"]):
            out = self.dir / f"r{len(reports)}.json"
            r = run([bbreplay, path, "--device", "cuda", "--ops", ops, "--check-only", "--json", out, *extra],
                    base_env(), timeout=900)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            reports.append(json.loads(out.read_text()))

        def key(c):
            return (c["op"], c["signature"], c["variant"], c["status"], c["flags"], c["message"])
        self.assertGreater(len(reports[0]["cases"]), 20)
        for other in reports[1:]:
            self.assertEqual([key(c) for c in reports[0]["cases"]], [key(c) for c in other["cases"]])
        r = run([bbreplay, path, "--device", "cuda", "--gpus", "99", "--check-only"], base_env())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--gpus", r.stderr)

    def test_value_probe_stays_out_of_graph_capture(self):
        r = run([PYTHON, "-c", GRAPH], preload_env(BB_TRACE=self.dir / "g.yaml"))
        self.assertEqual((r.returncode, r.stdout.strip(), r.stderr), (0, "True", ""))

    def test_training_routed_to_cuda_example_matches_native(self):
        import torch
        from test_routing import summary_row
        native, routed = self.dir / "native.pt", self.dir / "routed.pt"
        a = run([PYTHON, HERE / "train_and_dump.py", native, "--device", "cuda"], base_env())
        env = preload_env(BB_BACKEND=ROOT / "backends" / "cuda_example", BB_TRACE="off", BB_SUMMARY=self.dir / "s.txt")
        b = run([PYTHON, HERE / "train_and_dump.py", routed, "--device", "cuda"], env, timeout=1800)
        self.assertEqual((a.returncode, b.returncode), (0, 0), a.stderr + b.stderr)
        summary = (self.dir / "s.txt").read_text()
        for op in ("aten::addmm", "aten::native_layer_norm", "aten::_softmax", "aten::gelu", "aten::gelu_backward",
                   "aten::threshold_backward", "aten::relu", "aten::add.Tensor", "aten::sum.dim_IntList"):
            row = summary_row(summary, op)
            self.assertGreater(int(row["routed"]), 0, op + "\n" + summary)
            self.assertEqual((row["errors"], row["native"]), ("0", "0"), op + "\n" + summary)
        losses_native, losses_routed = [float(x) for x in a.stdout.split()], [float(x) for x in b.stdout.split()]
        # zip() stops at the shorter list: an empty or cut-short run must not pass unnoticed.
        self.assertEqual(len(losses_native), 4, a.stdout)  # train_and_dump.py's default steps
        self.assertEqual(len(losses_routed), len(losses_native), b.stdout)
        for n, r in zip(losses_native, losses_routed):
            self.assertAlmostEqual(n, r, delta=1e-4 * abs(n))
        ga, gb = torch.load(native), torch.load(routed)
        for name in ga:
            torch.testing.assert_close(gb[name], ga[name], rtol=1e-3, atol=1e-5, msg=name)

    def test_leaf_signatures_match_torch_profiler_on_cuda(self):
        (prof_leaf, _), (ours_leaf, _) = profile_and_trace(self, "--steps", "2", "--device", "cuda")
        self.assertGreater(len(prof_leaf), 100)
        self.assertEqual(prof_leaf, +ours_leaf)

if __name__ == "__main__":
    skip_unless_cuda()  # exit 77 without an NVIDIA GPU; exit 1 if there is one torch cannot use
    unittest.main()
