"""backends/liger (Liger-Kernel's Triton kernels for the ATen ops they can stand in for) on the CPU: every
call of a CPU program declines, with the reason, and the program sees native's results; without Liger-Kernel
each op falls back to native and says why. Its kernels run only on CUDA: scripts/gpu-check judges them there."""
import importlib.util
import unittest

from support import PYTHON, ROOT, TempDirTest, preload_env, run
from test_routing import summary_row

LIGER = ROOT / "backends" / "liger"
OPS = ("aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::_softmax", "aten::_softmax_backward_data")
PROGRAM = """
import torch
torch.manual_seed(0)
x = torch.randn(4, 64, requires_grad=True)
w, b = torch.ones(64, requires_grad=True), torch.zeros(64, requires_grad=True)
y = torch.softmax(torch.nn.functional.layer_norm(x, (64,), w, b), -1)
y.pow(2).sum().backward()
print(round(y.sum().item(), 4), round(x.grad.abs().sum().item(), 6), round(w.grad.abs().sum().item(), 6))
"""


class LigerBackend(TempDirTest):
    def route(self, **env):
        summary = self.dir / "summary.txt"
        r = run([PYTHON, "-c", PROGRAM], preload_env(BB_BACKEND=LIGER, BB_SUMMARY=summary, BB_TRACE="off", **env),
                cwd=self.dir, timeout=300)
        return r, summary.read_text() if summary.exists() else ""

    def native_output(self):
        r = run([PYTHON, "-c", PROGRAM], preload_env(BB_TRACE="off"), cwd=self.dir, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    @unittest.skipUnless(importlib.util.find_spec("liger_kernel"), "liger-kernel is not installed (scripts/test installs it)")
    def test_cpu_calls_decline_and_native_runs(self):
        r, s = self.route()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.native_output())
        for op in OPS:
            row = summary_row(s, op)
            self.assertEqual((row["calls"], row["routed"], row["declined"], row["errors"]), ("1", "0", "1", "0"), s)
        self.assertIn("aten::native_layer_norm: first decline: CUDA tensors only", s)

    def test_its_policy_loads_and_names_the_four_ops(self):
        # backends/liger/policy.yaml: the sum layer norm's backward calls is allowed for that op alone.
        r, s = self.route(BB_POLICY=LIGER / "policy.yaml")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.native_output())
        self.assertIn(f"policy {LIGER / 'policy.yaml'}", s)
        self.assertNotIn("policy", r.stderr)  # (an error in the policy is said on stderr, and nothing routes)
        for op in OPS:
            self.assertEqual(summary_row(s, op)["calls"], "1", s)

    def test_without_liger_each_op_falls_back_and_says_why(self):
        # (a liger_kernel package without its ops, first on the path: what an API that moved looks like)
        broken = self.dir / "broken"
        (broken / "liger_kernel" / "ops").mkdir(parents=True)
        (broken / "liger_kernel" / "__init__.py").write_text("")
        (broken / "liger_kernel" / "ops" / "__init__.py").write_text("")
        r, s = self.route(PYTHONPATH=broken)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.native_output())
        for op in OPS:
            self.assertEqual(summary_row(s, op)["routed"], "0", s)
        self.assertRegex(r.stderr + s, r"liger-kernel (is not installed|0\.8\.5 has no liger_kernel\.ops\.layer_norm)")


if __name__ == "__main__":
    unittest.main()
