"""Routing ops to generated kernels in unmodified programs: routing, fallback, decline, faults,
shadow mode, policies, broken backends, and a training run that matches native."""
import re
import unittest

from support import HERE, PYTHON, ROOT, TempDirTest, base_env, load_trace, preload_env, run

BEHAVIOURS = ROOT / "tests" / "backends" / "behaviours"
CHEATS = ROOT / "tests" / "cheats"
BROKEN = ROOT / "tests" / "backends" / "broken"
CPU_REFERENCE = ROOT / "backends" / "cpu_reference"


def summary_row(summary, op):
    """The numbers of one op's row in the routing summary, by column name."""
    m = re.search(rf"^  {re.escape(op)}\s+(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)$",
                  summary, re.M)
    assert m, f"no row for {op} in:\n{summary}"
    keys = ["mode", "calls", "routed", "declined", "unmet", "passed", "errors", "native", "mismatch"]
    return dict(zip(keys, m.groups()))


class Routing(TempDirTest):
    def route(self, code, backend=BEHAVIOURS, **bb):
        """Runs `code` with the backend; returns (result, summary text)."""
        summary = self.dir / "summary.txt"
        env = preload_env(BB_BACKEND=backend, BB_SUMMARY=summary, BB_TRACE="off", **bb)
        r = run([PYTHON, "-c", code], env, cwd=self.dir, timeout=600)
        return r, summary.read_text() if summary.exists() else ""

    def write_policy(self, text):
        path = self.dir / "policy.yaml"
        path.write_text(text)
        return path

    def test_watermark_proves_routing_and_decline_falls_back(self):
        r, s = self.route("import torch\n"
                          "print(torch.relu(torch.randn(5)).tolist())\n"
                          "print(bool((torch.relu(torch.randn(7)) >= 0).all()))\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "[42.0, 42.0, 42.0, 42.0, 42.0]\nTrue\n")
        row = summary_row(s, "aten::relu")
        self.assertEqual((row["calls"], row["routed"], row["declined"]), ("2", "1", "1"))
        self.assertIn("aten::relu: first decline: 7-element inputs are left to native", s)
        self.assertEqual(r.stderr, "")  # a decline is normal: nothing on stderr

    def test_a_throwing_kernel_falls_back_and_says_so_once(self):
        r, s = self.route("import torch\nx = torch.arange(4.)\nprint([torch.neg(x).tolist() for _ in range(3)][-1])")
        self.assertEqual((r.returncode, r.stdout), (0, "[-0.0, -1.0, -2.0, -3.0]\n"))
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("generated kernel for aten::neg", lines[0])
        self.assertIn("neg.cpp) failed: neg kernel failed on purpose; the native kernel ran instead", lines[0])
        self.assertEqual(summary_row(s, "aten::neg")["errors"], "3")

    def test_on_error_raise_lets_the_program_see_the_error(self):
        policy = self.write_policy("version: 1\nops:\n  aten::neg: {on_error: raise}\n")
        r, _ = self.route("import torch\ntorch.neg(torch.ones(2))", BB_POLICY=policy)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("neg kernel failed on purpose", r.stderr)

    def test_a_kernel_calling_its_own_op_is_caught(self):
        r, s = self.route("import torch\nx = torch.randn(6)\n"
                          "print(torch.allclose(torch.sigmoid(x), 1 / (1 + (-x.double()).exp()).float()))")
        self.assertEqual((r.returncode, r.stdout), (0, "True\n"), r.stderr)
        self.assertIn("calls aten::sigmoid itself; its result was discarded and the native kernel ran", r.stderr)
        self.assertEqual(summary_row(s, "aten::sigmoid")["native"], "1")

    def test_a_kernel_doing_its_work_with_other_aten_ops_is_caught(self):
        r, s = self.route("import torch\nx = torch.tensor([-2., 3.])\nprint(torch.abs(x).tolist())")
        self.assertEqual((r.returncode, r.stdout), (0, "[2.0, 3.0]\n"), r.stderr)
        self.assertRegex(r.stderr, r"generated kernel for aten::abs \(\S+abs.cpp\) calls aten::\w+(\.\w+)? \(a compute "
                                   r"op\); its result was discarded and the native kernel ran")
        self.assertEqual(summary_row(s, "aten::abs")["native"], "1")

    def test_a_crash_names_the_op_and_file_then_dies_as_it_would(self):
        r, _ = self.route("import torch\nprint('before', flush=True)\ntorch.tanh(torch.ones(13))\nprint('after')")
        self.assertEqual(r.returncode, -11)  # SIGSEGV, as without bbshim
        self.assertEqual(r.stdout, "before\n")
        self.assertIn("[bbshim] Segmentation fault in the generated kernel for aten::tanh (", r.stderr)
        self.assertIn("tanh__default/tanh.cpp)", r.stderr)
        self.assertIn("0# ", r.stderr)  # the stack trace

    def test_shadow_mode_keeps_native_results_and_reports_mismatches(self):
        policy = self.write_policy("version: 1\nops:\n  aten::exp: {mode: shadow}\n")
        # float64 exp is declined by this kernel: it is the reference the native float32 result must meet.
        r, s = self.route("import torch\nx = torch.linspace(0, 1, 9)\n"
                          "print(torch.allclose(torch.exp(x), x.double().exp().float(), rtol=1e-6, atol=0))",
                          BB_POLICY=policy)
        self.assertEqual((r.returncode, r.stdout), (0, "True\n"), r.stderr)
        row = summary_row(s, "aten::exp")
        self.assertEqual((row["mode"], row["mismatch"]), ("shadow", "1/1"))
        self.assertRegex(s, r"aten::exp shadow mismatch \(float32\[9\]\) output 0: float32\[9\]: \d+ of 9 elements "
                            r"differ; first at flat index \d+ \(expected [\d.e+-]+, got [\d.e+-]+\); max abs error")
        # The largest error over every compared call, and which compared call first left tolerance.
        self.assertRegex(s, r"aten::exp: shadow largest error: abs (?!0,)[\d.e+-]+, rel (?!0;)[\d.e+-]+; "
                            r"first out of tolerance: compared call 1\n")

    def test_a_result_in_an_inputs_memory_is_refused_when_routed(self):
        # clone returning its input: the program would write into what it cloned from.
        r, s = self.route("import torch\nx = torch.ones(4)\ny = x.clone()\ny.zero_()\nprint(x.tolist())",
                          backend=CHEATS / "aliasing")
        self.assertEqual((r.returncode, r.stdout), (0, "[1.0, 1.0, 1.0, 1.0]\n"), r.stderr)
        self.assertIn("clone.cpp): result 0 shares memory with argument 'self', which the schema does not allow; "
                      "its result was discarded and the native kernel ran", r.stderr)
        row = summary_row(s, "aten::clone")
        self.assertEqual((row["routed"], row["errors"]), ("0", row["calls"]))
        self.assertIn("aten::clone: first error: aliasing: result 0 shares memory with argument 'self'", s)

    def test_shadow_mode_reports_a_kernel_that_changes_its_input(self):
        policy = self.write_policy("version: 1\nops:\n  aten::relu: {mode: shadow}\n")
        r, s = self.route("import torch\nx = torch.linspace(-1, 1, 8)\ny = torch.relu(x)\n"
                          "print(x.min().item(), y.min().item())", backend=CHEATS / "input_mutation", BB_POLICY=policy)
        self.assertEqual((r.returncode, r.stdout), (0, "-1.0 0.0\n"), r.stderr)  # the program's input is intact
        self.assertEqual(summary_row(s, "aten::relu")["mismatch"], "1/1")
        self.assertIn("aten::relu shadow mismatch (float32[8]) input-mutation: argument 'self', which the schema does "
                      "not let the op write, differs from native's after the call", s)

    def test_shadow_mode_reports_a_result_in_an_inputs_memory(self):
        policy = self.write_policy("version: 1\nops:\n  aten::clone: {mode: shadow}\n")
        r, s = self.route("import torch\nx = torch.ones(3)\nprint(x.clone().tolist())", backend=CHEATS / "aliasing",
                          BB_POLICY=policy)
        self.assertEqual((r.returncode, r.stdout), (0, "[1.0, 1.0, 1.0]\n"), r.stderr)
        self.assertIn("aten::clone shadow mismatch (float32[3]) aliasing: result 0 shares memory with argument "
                      "'self', which native's does not", s)

    def test_policy_conditions_narrow_routing(self):
        policy = self.write_policy("version: 1\nops:\n  aten::relu:\n    when: {dtype: [float64], rank: [1, 1]}\n")
        r, s = self.route("import torch\n"
                          "print(torch.relu(torch.ones(5)).tolist())\n"                       # float32: unmet
                          "print(torch.relu(torch.ones(5, dtype=torch.float64)).tolist())\n"  # routed
                          "print(torch.relu(torch.ones(1, 5, dtype=torch.float64)).tolist())\n"  # rank 2: unmet
                          "print(torch.neg(torch.ones(1)).tolist())",                          # not in the policy
                          BB_POLICY=policy)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "[1.0, 1.0, 1.0, 1.0, 1.0]\n[42.0, 42.0, 42.0, 42.0, 42.0]\n"
                                   "[[1.0, 1.0, 1.0, 1.0, 1.0]]\n[-1.0]\n")
        row = summary_row(s, "aten::relu")
        self.assertEqual((row["calls"], row["routed"], row["unmet"]), ("3", "1", "2"))
        self.assertNotIn("aten::neg", s)

    def test_meta_tensors_pass_through(self):
        r, s = self.route("import torch\nprint(torch.relu(torch.empty(5, device='meta')).shape)")
        self.assertEqual((r.returncode, r.stdout), (0, "torch.Size([5])\n"))
        self.assertEqual(summary_row(s, "aten::relu")["passed"], "1")

    def test_routed_calls_are_marked_in_the_trace(self):
        trace = self.dir / "t.yaml"
        r = run([PYTHON, "-c", "import torch\ntorch.relu(torch.ones(5)); torch.relu(torch.ones(7))"],
                preload_env(BB_BACKEND=BEHAVIOURS, BB_TRACE=trace, BB_LOG="off"), cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        relu = {e["args"][0]["shape"][0]: e for e in load_trace(trace)["ops"] if e["op"] == "aten::relu"}
        self.assertEqual(relu[5].get("routed"), 1)
        self.assertNotIn("routed", relu[7])  # declined

    def test_disabled_means_no_routing(self):
        r, _ = self.route("import torch\nprint(torch.relu(torch.ones(2)).tolist())", BB_DISABLE=1)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "[1.0, 1.0]\n", ""))


class ConfigFile(TempDirTest):
    def test_backend_policy_and_summary_from_one_config_file(self):
        cfg = self.dir / "bb.yaml"
        cfg.write_text(f"trace: off\nbackend: {BEHAVIOURS}\nsummary: summary.txt\n"
                       "policy:\n  version: 1\n  ops:\n    aten::relu:\n      when: {dtype: [float64]}\n")
        r = run([PYTHON, "-c", "import torch\nprint(torch.relu(torch.ones(2, dtype=torch.float64)).tolist(), "
                               "torch.relu(torch.ones(2)).tolist(), torch.neg(torch.ones(1)).tolist())"],
                preload_env(BB_CONFIG=cfg), cwd=self.dir, timeout=600)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "[42.0, 42.0] [1.0, 1.0] [-1.0]\n", ""))
        row = summary_row((self.dir / "summary.txt").read_text(), "aten::relu")  # relative to the file
        self.assertEqual((row["routed"], row["unmet"]), ("1", "1"))
        self.assertEqual(list(self.dir.glob("bbtrace*")), [])

    def test_a_backend_named_by_the_policy_is_said_loudly(self):
        # A policy file reads like data; its backend: key makes the program compile and run code.
        policy = self.dir / "policy.yaml"
        policy.write_text(f"version: 1\nbackend: {BEHAVIOURS}\nops:\n  aten::relu: {{}}\n")
        summary = self.dir / "summary.txt"
        r = run([PYTHON, "-c", "import torch\nprint(torch.relu(torch.ones(2)).tolist())"],
                preload_env(BB_POLICY=policy, BB_TRACE="off", BB_SUMMARY=summary), cwd=self.dir, timeout=600)
        self.assertEqual((r.returncode, r.stdout), (0, "[42.0, 42.0]\n"), r.stderr)
        self.assertIn(f"the policy {policy} names the backend", r.stderr)
        self.assertIn("its code is compiled and runs inside this program", r.stderr)
        first = summary.read_text().splitlines()[0]
        self.assertIn("(named by the policy file: its code was compiled and ran in this program)", first)
        # Named explicitly, the same backend raises no such warning.
        r = run([PYTHON, "-c", "import torch\nprint(torch.relu(torch.ones(2)).tolist())"],
                preload_env(BB_POLICY=policy, BB_BACKEND=BEHAVIOURS, BB_TRACE="off", BB_SUMMARY=summary),
                cwd=self.dir, timeout=600)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "[42.0, 42.0]\n", ""))
        self.assertNotIn("named by the policy", summary.read_text())

    def test_an_inline_policy_error_points_into_the_config_file(self):
        cfg = self.dir / "bb.yaml"
        cfg.write_text(f"backend: {BEHAVIOURS}\npolicy:\n  version: 1\n  ops:\n    aten::relux: {{}}\n")
        r = run([PYTHON, "-c", "import torch\nprint(torch.relu(torch.ones(1)).tolist())"],
                preload_env(BB_CONFIG=cfg, BB_TRACE="off"), cwd=self.dir, timeout=600)
        self.assertEqual((r.returncode, r.stdout), (0, "[1.0]\n"))
        self.assertEqual(r.stderr, f"[bbshim] policy error: {cfg}:5:5: aten::relux unknown op (no such overload in this "
                                   "torch); routing is off\n")


class BrokenBackend(TempDirTest):
    def test_every_problem_is_named_and_the_rest_still_works(self):
        env = preload_env(BB_BACKEND=BROKEN, BB_TRACE="off", BB_SUMMARY=self.dir / "s.txt")
        r = run([PYTHON, "-c", "import torch\nprint(torch.sigmoid(torch.zeros(2)).tolist(), "
                               "torch.relu(torch.ones(2)).tolist(), torch.abs(-torch.ones(2)).tolist())"], env,
                timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "[42.0, 42.0] [1.0, 1.0] [1.0, 1.0]\n")  # sigmoid routed, the rest native
        err = r.stderr
        self.assertIn("broken/notafolder: folder name is not <op>__<overload>", err)
        self.assertRegex(err, r"broken/relu__default: compile error( \(cached\))?:")
        self.assertIn("relu.cpp:4:", err)  # the compiler's own message, with the line
        self.assertIn("broken/neg__default: registers no kernel (missing BB_KERNEL(\"aten::neg\", fn)?)", err)
        self.assertIn("abs__default/abs.cpp: aten::abs: the kernel's signature at::Tensor (at::Tensor const&, long) "
                      "= (Tensor _0, int _1) -> Tensor _0 does not match aten::abs(Tensor self) -> Tensor", err)
        self.assertIn("aten::linear: is CompositeImplicitAutograd", err)


class Policies(TempDirTest):
    def check_policy_error(self, text, expected):
        path = self.dir / "p.yaml"
        path.write_text(text)
        r = run([PYTHON, "-c", "import torch\nprint(torch.relu(torch.ones(2)).tolist())"],
                preload_env(BB_BACKEND=BEHAVIOURS, BB_POLICY=path, BB_TRACE="off"), timeout=600)
        self.assertEqual((r.returncode, r.stdout), (0, "[1.0, 1.0]\n"))  # routing off, program fine
        self.assertEqual(r.stderr, f"[bbshim] policy error: {path}:{expected}; routing is off\n")

    def test_malformed_yaml(self):
        self.check_policy_error("version: 1\nops: {aten::relu: [\n", "3:1: end of sequence flow not found")

    def test_unknown_op(self):
        self.check_policy_error("version: 1\nops:\n  aten::relux: {}\n",
                                "3:3: aten::relux unknown op (no such overload in this torch)")

    def test_composite_op(self):
        self.check_policy_error("version: 1\nops:\n  aten::linear: {}\n",
                                "3:3: aten::linear is CompositeImplicitAutograd: it decomposes above the routing "
                                "point and is never reached with autograd on; route the ops it decomposes into instead")

    def test_factory_op(self):
        self.check_policy_error("version: 1\nops:\n  aten::empty.memory_format: {}\n",
                                "3:3: aten::empty.memory_format has its own BackendSelect kernel (a factory or "
                                "_to_copy): it cannot be routed")

    def test_bad_condition(self):
        self.check_policy_error("version: 1\nops:\n  aten::relu:\n    when: {dtype: [float33]}\n",
                                "4:20: unknown dtype 'float33' (use torch's names: float32, bfloat16, int64, ...)")

    def test_misspelt_key(self):
        self.check_policy_error("version: 1\nops:\n  aten::relu: {wehn: {}}\n",
                                "3:16: unknown key 'wehn' (expected mode, when, on_error, tolerance, strict_strides, allow_aten)")


class Training(TempDirTest):
    def test_training_with_the_cpu_reference_backend_matches_native(self):
        import torch
        native, routed = self.dir / "native.pt", self.dir / "routed.pt"
        a = run([PYTHON, HERE / "train_and_dump.py", native], base_env())
        env = preload_env(BB_BACKEND=CPU_REFERENCE, BB_TRACE="off", BB_SUMMARY=self.dir / "s.txt")
        b = run([PYTHON, HERE / "train_and_dump.py", routed], env, timeout=600)
        self.assertEqual((a.returncode, b.returncode), (0, 0), a.stderr + b.stderr)
        summary = (self.dir / "s.txt").read_text()
        for op in ("aten::addmm", "aten::native_layer_norm", "aten::_softmax", "aten::gelu", "aten::gelu_backward",
                   "aten::threshold_backward"):
            row = summary_row(summary, op)
            self.assertGreater(int(row["routed"]), 0, op)
            self.assertEqual((row["errors"], row["native"]), ("0", "0"), op)  # honest kernels: no false alarm
        losses_native = [float(x) for x in a.stdout.split()]
        losses_routed = [float(x) for x in b.stdout.split()]
        # zip() stops at the shorter list: an empty or cut-short run must not pass unnoticed.
        self.assertEqual(len(losses_native), 4, a.stdout)  # train_and_dump.py's default steps
        self.assertEqual(len(losses_routed), len(losses_native), b.stdout)
        for n, r in zip(losses_native, losses_routed):
            self.assertAlmostEqual(n, r, delta=1e-5 * abs(n))
        ga, gb = torch.load(native), torch.load(routed)
        self.assertEqual(ga.keys(), gb.keys())
        for name in ga:
            torch.testing.assert_close(gb[name], ga[name], rtol=1e-4, atol=1e-6, msg=name)


if __name__ == "__main__":
    unittest.main()
