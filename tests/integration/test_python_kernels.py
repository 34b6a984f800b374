"""Python kernels under the preload (issue 15): BackendBench's folder layouts loaded unchanged and our
@bbshim.kernel form, with the guarantees C++ kernels have — routing, decline, failure falling back to
native with a count, the native-call watch (through torch.* calls in Python too), shadow mode, the
summary — and bad files reported per op while the rest loads. tests/backends/python holds the kernels."""
import os
import re
import sys
import time
import unittest

from support import BUILD, PYTHON, ROOT, ReplayOfProgram, TempDirTest, base_env, preload_env, run
from test_routing import summary_row

PY_BACKEND = ROOT / "tests" / "backends" / "python"
COMPILE_LISTENER = ROOT / "tests" / "backends" / "compile_listener"
LOAD_INLINE = ROOT / "tests" / "backends" / "backendbench_cpp"
EXTENSIONS = BUILD / "torch-extensions"  # torch's load_inline builds (TORCH_EXTENSIONS_DIR)
BRIDGE = BUILD / "lib" / "libbbshim_python.so"

PROGRAM = """
import torch
x = torch.tensor([-1.5, 0.0, 2.0])
print(torch.relu(x).tolist())
print(torch.add(x, x, alpha=2).tolist(), torch.add(x, 1.0).tolist())
print(torch.mul(x, x).tolist(), torch.mul(x.double(), x.double()).tolist())
print([round(v, 4) for v in torch.cos(x).tolist()])
print(torch.neg(x).tolist(), torch.abs(x).tolist(), torch.exp(torch.zeros(2)).tolist(), torch.exp(torch.zeros(2)).tolist())
print(torch.sigmoid(torch.zeros(1)).tolist(), torch.tanh(torch.zeros(1)).tolist(), torch.sin(torch.zeros(1)).tolist())
"""
NATIVE_OUTPUT = None  # PROGRAM's output without the preload, computed once


class PythonKernels(TempDirTest):
    def route(self, code, backend=PY_BACKEND, **bb):
        summary = self.dir / "summary.txt"
        env = preload_env(BB_BACKEND=backend, BB_SUMMARY=summary, BB_TRACE="off", **bb)
        r = run([PYTHON, "-c", code], env, cwd=self.dir, timeout=300)
        return r, summary.read_text() if summary.exists() else ""

    def native(self):
        global NATIVE_OUTPUT
        if NATIVE_OUTPUT is None:
            r = run([PYTHON, "-c", PROGRAM], preload_env(BB_TRACE="off"), cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            NATIVE_OUTPUT = r.stdout
        return NATIVE_OUTPUT

    def test_every_form_and_behaviour_of_python_kernels(self):
        r, s = self.route(PROGRAM)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The program sees native's results wherever a kernel was caught, declined or failed, and never
        # what a kernel printed while importing.
        self.assertEqual(r.stdout, self.native())
        self.assertNotIn("importing the cos kernel", r.stdout)
        rows = {op: summary_row(s, op) for op in ("aten::relu", "aten::add.Tensor", "aten::mul.Tensor", "aten::cos",
                                                  "aten::neg", "aten::abs", "aten::exp", "aten::sigmoid",
                                                  "aten::tanh", "aten::sin")}
        # BackendBench's layout (the first implementation file in sorted order: _v2 raises at import).
        # (abs's kernel calls torch.relu twice: those calls are routed too, inside it.)
        relu = rows["aten::relu"]
        self.assertEqual((relu["calls"], relu["routed"], relu["errors"]), ("3", "3", "0"))
        # BackendBench's earlier layout, a folder per op: each functional overload of aten::add.
        self.assertIn("aten::add.Scalar", s)
        self.assertNotIn("aten::add.out", s)
        self.assertEqual(rows["aten::add.Tensor"]["errors"], "0")
        self.assertGreaterEqual(int(rows["aten::add.Tensor"]["routed"]), 2)
        # @bbshim.kernel, declining with bbshim.Decline.
        self.assertEqual((rows["aten::mul.Tensor"]["routed"], rows["aten::mul.Tensor"]["declined"]), ("1", "1"))
        self.assertIn("aten::mul.Tensor: first decline: same-shape float32 only", s)
        # Printing at import: said on stderr, the kernel still used.
        self.assertEqual(rows["aten::cos"]["routed"], "1")
        self.assertRegex(r.stderr, r"cos__default_implementation.py printed 25 characters to stdout while importing")
        # The native-call watch: the op itself through torch.neg, and other compute ops through torch.relu.
        self.assertIn("aten::neg: kernel calls aten::neg itself", s)
        self.assertEqual(rows["aten::neg"]["routed"], "0")
        self.assertIn("aten::abs: kernel calls aten::relu (a compute op)", s)
        self.assertEqual((rows["aten::abs"]["routed"], rows["aten::abs"]["native"]), ("0", "1"))
        # A raising kernel: native runs, every failure counted, said once.
        self.assertEqual(rows["aten::exp"]["errors"], "2")
        self.assertIn("aten::exp: first error: RuntimeError: exp kernel failed on purpose", s)
        self.assertEqual(r.stderr.count("generated kernel for aten::exp"), 1, r.stderr)
        # Bad files, each reported for its op with the file and what was expected.
        folder = PY_BACKEND
        self.assertIn(f"aten::sigmoid: first error: {folder}/sigmoid__default/sigmoid__default_implementation.py: "
                      "cannot import it: SyntaxError: ", s)
        self.assertIn(f"aten::tanh: first error: {folder}/tanh__default/tanh__default_implementation.py: no function "
                      "named tanh__default_kernel_impl (BackendBench's layout: ", s)
        self.assertIn(f"aten::sin: first error: {folder}/sin__default/sin__default_implementation.py: "
                      "sin__default_kernel_impl() cannot take the 1 positional arguments of aten::sin(Tensor self)", s)
        for op in ("aten::sigmoid", "aten::tanh", "aten::sin"):
            self.assertEqual((rows[op]["routed"], rows[op]["errors"]), ("0", "1"), op)

    def test_shadow_mode_compares_a_python_kernel_with_native(self):
        policy = self.dir / "policy.yaml"
        policy.write_text("version: 1\nops:\n  aten::relu: {mode: shadow}\n  aten::mul.Tensor: {mode: shadow}\n")
        r, s = self.route("import torch\nx = torch.randn(64)\nfor _ in range(3):\n    torch.mul(torch.relu(x), x)\n",
                          BB_POLICY=policy)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(summary_row(s, "aten::relu")["mismatch"], "0/3")
        self.assertEqual(summary_row(s, "aten::mul.Tensor")["mismatch"], "0/3")

    def test_a_python_kernel_in_a_training_step(self):
        # relu routed to Python inside forward and backward passes of a small model; the losses equal native's.
        code = ("import torch\ntorch.manual_seed(0)\n"
                "m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))\n"
                "opt = torch.optim.SGD(m.parameters(), lr=0.1)\nx, y = torch.randn(32, 8), torch.randn(32, 1)\n"
                "for _ in range(3):\n"
                "    loss = torch.nn.functional.mse_loss(m(x), y)\n    opt.zero_grad()\n    loss.backward()\n"
                "    opt.step()\n    print(f'{loss.item():.6f}')\n")
        native = run([PYTHON, "-c", code], preload_env(BB_TRACE="off"), cwd=self.dir)
        r, s = self.route(code)
        self.assertEqual((r.returncode, r.stdout), (0, native.stdout), r.stderr)
        self.assertEqual(summary_row(s, "aten::relu")["routed"], "3")
        self.assertIn("s importing their files and in Triton's compiler", s)

    def test_the_summary_says_what_imports_and_compiles_took(self):
        # The stand-in Triton kernel "compiles" 0.2 s on each new shape: the routing summary counts both.
        code = "import torch\nfor n in (5, 6, 6):\n    torch.relu(torch.randn(n))\n"
        r, s = self.route(code, backend=COMPILE_LISTENER)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(summary_row(s, "aten::relu")["routed"], "3", s)
        seconds = float(re.search(r"Python kernels: ([0-9.]+) s importing", s).group(1))
        self.assertGreaterEqual(seconds, 0.399, s)

    def test_a_mixed_folder_and_a_python_kernel_in_a_program_without_the_op(self):
        # One folder mixing kinds across ops: a C++ kernel next to a Python one; a folder holding both is refused.
        backend = self.dir / "mixed"
        (backend / "relu__default").mkdir(parents=True)
        (backend / "relu__default" / "relu__default_implementation.py").write_text(
            (PY_BACKEND / "relu__default" / "relu__default_implementation_v1.py").read_text())
        (backend / "neg__default").mkdir()
        (backend / "neg__default" / "neg.cpp").write_text(
            "#include <ATen/ATen.h>\n#include <bb/kernel.h>\n"
            "at::Tensor neg(const at::Tensor& x) { throw bb::Decline(\"never mind\"); }\nBB_KERNEL(\"aten::neg\", neg);\n")
        (backend / "exp__default").mkdir()
        (backend / "exp__default" / "exp.cpp").write_text("")
        (backend / "exp__default" / "exp__default_implementation.py").write_text("")
        r, s = self.route("import torch\nx = torch.tensor([-1., 2.])\nprint(torch.relu(x).tolist(), torch.neg(x).tolist())",
                          backend=backend)
        self.assertEqual((r.returncode, r.stdout), (0, "[0.0, 2.0] [1.0, -2.0]\n"), r.stderr)
        self.assertEqual(summary_row(s, "aten::relu")["routed"], "1")
        self.assertEqual(summary_row(s, "aten::neg")["declined"], "1")
        self.assertIn("exp__default: holds both C++/CUDA and Python kernels; keep one kind per op folder", r.stderr)


    def test_backendbench_cpp_pairs_are_built_by_load_inline(self):
        # BackendBench's C++/CUDA form: neg's .cpp (sorted before a _v2.py that must not be imported) is built
        # by torch's load_inline and routed; exp's does not compile: its calls fall back, the error is said.
        r, s = self.route("import torch\nx = torch.tensor([-1.5, 0.0, 2.0])\n"
                          "print(torch.neg(x).tolist(), torch.exp(torch.zeros(2)).tolist())",
                          backend=LOAD_INLINE, TORCH_EXTENSIONS_DIR=EXTENSIONS)
        self.assertEqual((r.returncode, r.stdout), (0, "[1.5, -0.0, -2.0] [1.0, 1.0]\n"), r.stderr)
        self.assertEqual(summary_row(s, "aten::neg")["routed"], "1", s)
        self.assertEqual((summary_row(s, "aten::exp")["routed"], summary_row(s, "aten::exp")["errors"]), ("0", "1"), s)
        self.assertIn(f"aten::exp: first error: {LOAD_INLINE}/exp__default/exp__default_implementation.cpp: cannot "
                      "build it (load_inline): ", s)
        self.assertIn("this_is_not_declared", r.stderr)

    def test_a_policy_may_allow_named_aten_ops_inside_kernels(self):
        # abs's kernel is written with torch ops (relu, neg, add): a native call by default; allowed by name,
        # routed and said in the summary; a list that leaves one of them out still catches that one.
        program = "import torch\nx = torch.tensor([-1.5, 0.0, 2.0])\nprint(torch.abs(x).tolist())\n"
        policy = self.dir / "policy.yaml"
        policy.write_text("version: 1\nops:\n  aten::abs: {allow_aten: [aten::relu, neg, aten::add.Tensor]}\n")
        r, s = self.route(program, BB_POLICY=policy)
        self.assertEqual((r.returncode, r.stdout), (0, "[1.5, 0.0, 2.0]\n"), r.stderr)
        self.assertEqual((summary_row(s, "aten::abs")["routed"], summary_row(s, "aten::abs")["native"]), ("1", "0"), s)
        self.assertIn("aten::abs: kernel calls ATen compute ops, as the policy allows (allow_aten), in 1 calls: "
                      "aten::relu, aten::neg, aten::add.Tensor", s)
        policy.write_text("version: 1\nops:\n  aten::abs: {allow_aten: [aten::relu, aten::add]}\n")
        r, s = self.route(program, BB_POLICY=policy)
        self.assertEqual((summary_row(s, "aten::abs")["routed"], summary_row(s, "aten::abs")["native"]), ("0", "1"), s)
        self.assertIn("aten::abs: kernel calls aten::neg (a compute op)", s)

    def test_an_import_that_never_ends_is_interrupted_and_the_op_falls_back(self):
        backend = self.dir / "hangs"
        (backend / "relu__default").mkdir(parents=True)
        (backend / "relu__default" / "relu__default_implementation.py").write_text(
            "while True:  # a loop that never ends, even when an exception is caught inside it\n"
            "    try:\n        pass\n    except Exception:\n        pass\n")
        started = time.monotonic()
        r, s = self.route("import torch\nprint(torch.relu(torch.tensor([-1.0, 2.0])).tolist())\n", backend=backend,
                          BB_PYTHON_IMPORT_TIMEOUT="3")
        self.assertLess(time.monotonic() - started, 60)
        self.assertEqual((r.returncode, r.stdout), (0, "[0.0, 2.0]\n"), r.stderr)
        self.assertEqual((summary_row(s, "aten::relu")["routed"], summary_row(s, "aten::relu")["errors"]), ("0", "1"), s)
        self.assertIn("relu__default_implementation.py: cannot import it: ImportTimeout: did not finish within 3 s "
                      "(BB_PYTHON_IMPORT_TIMEOUT)", s)

    def test_bbbackend_lists_python_folders_without_importing_them(self):
        r = run([BUILD / "bin" / "bbbackend", "build", PY_BACKEND], base_env(), cwd=self.dir, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"python   {PY_BACKEND}/relu__default: {PY_BACKEND}/relu__default/relu__default_implementation_v1.py "
                      "(imported on the op's first call in a Python process: not built here)", r.stdout)
        self.assertIn("0 kernels usable, 10 Python folders (not imported here), 0 problems", r.stdout)



CHEATS = ROOT / "tests" / "cheats" / "python"
CHEAT_FLAGS = {  # folder: (op, flag)
    "native_call": ("aten::relu", "native-call"),
    "cached_result": ("aten::relu", "cached-result"),
    "aliasing": ("aten::clone", "aliasing"),
    "precision_downgrade": ("aten::mul.Tensor", "precision-downgrade"),
    "input_mutation": ("aten::relu", "input-mutation"),
}


def assert_every_cheat_flagged(test, *args, timeout=600):
    """Replays each cheat of CHEAT_FLAGS on its op's traced cases (test: a ReplayOfProgram; args: more
    bbreplay arguments, the device among them): every case fails with the cheat's flag."""
    for folder, (op, flag) in CHEAT_FLAGS.items():
        with test.subTest(cheat=folder):
            data, r = test.replay("--backend", CHEATS / folder, "--ops", op, "--variants", "traced", *args,
                                  timeout=timeout)
            test.assertEqual(r.returncode, 1, r.stdout[-2000:] + r.stderr[-2000:])
            cases = [c for c in data["cases"] if c["op"] == op]
            test.assertTrue(cases, r.stderr[-2000:])
            for c in cases:
                test.assertEqual(c["status"], "failed", c)
                test.assertIn(flag, c["flags"], c)


REPLAYED = """
import torch
torch.manual_seed(0)
x = torch.randn(64, 33)
torch.relu(x)
x.clone()
torch.mul(torch.randn(64, 33), torch.randn(64, 33))
torch.cos(torch.randn(100))
torch.exp(torch.randn(10))
torch.sin(torch.randn(10))
"""


class ReplayOfPythonKernels(ReplayOfProgram):
    """bbreplay runs Python kernels in a Python host (item 3): the same checks as for C++ kernels."""
    PROGRAM = REPLAYED

    def test_honest_python_kernels_pass_and_bad_ones_fail_with_the_reason(self):
        data, r = self.replay("--backend", PY_BACKEND, "--device", "cpu", "--check-only", "--variants", "traced")
        by_op = {}
        for c in data["cases"]:
            by_op.setdefault(c["op"], []).append(c)
        for op in ("aten::relu", "aten::cos", "aten::mul.Tensor"):
            self.assertTrue(by_op.get(op), (op, r.stdout[-2000:], r.stderr[-2000:]))
            for c in by_op[op]:
                self.assertEqual((c["status"], c["flags"]), ("passed", []), c)
            # (its first call imported its file: that time has its own phase)
            self.assertGreater(by_op[op][0]["spent"].get("kernel import and compile", 0), 0, by_op[op][0])
        for c in by_op["aten::exp"]:
            self.assertNotEqual(c["status"], "passed", c)
            self.assertIn("exp kernel failed on purpose", c["message"], c)
        for c in by_op["aten::sin"]:
            self.assertNotEqual(c["status"], "passed", c)
            self.assertIn("cannot take the 1 positional arguments", c["message"], c)

    def test_every_python_cheat_is_flagged_by_name(self):
        assert_every_cheat_flagged(self, "--device", "cpu", "--check-only")

    def test_imports_and_compiles_are_their_own_phase(self):
        # A kernel's first call imports its file; a stand-in for Triton reports a 0.2 s compile on each
        # new shape to Triton's compile listener: both charged to their phase, not to "kernel runs".
        data, r = self.replay("--backend", COMPILE_LISTENER, "--ops", "relu", "--device", "cpu", "--check-only",
                              "--variants", "traced,odd-size")
        cases = [c for c in data["cases"] if c["op"] == "aten::relu"]
        self.assertEqual(len(cases), 2, r.stdout[-2000:] + r.stderr[-2000:])
        for c in cases:
            self.assertEqual(c["status"], "passed", c)
            # (0.2 s from Triton's microseconds, less a rounding of the sum)
            self.assertGreaterEqual(c["spent"].get("kernel import and compile", 0), 0.199, c)
            self.assertLess(c["spent"].get("kernel runs", 0), 0.1, c)


class ReplayOfLoadInline(ReplayOfProgram):
    """bbreplay judges BackendBench's load_inline form like any Python kernel (its build happens in the
    first, checked, call)."""
    PROGRAM = "import torch\ntorch.neg(torch.randn(64, 33))\ntorch.exp(torch.randn(10))\n"

    def test_a_built_pair_passes_and_one_that_does_not_build_fails_with_the_compiler_message(self):
        os.environ["TORCH_EXTENSIONS_DIR"] = str(EXTENSIONS)
        try:
            data, r = self.replay("--backend", LOAD_INLINE, "--device", "cpu", "--variants", "traced,noncontiguous",
                                  timeout=900)
        finally:
            del os.environ["TORCH_EXTENSIONS_DIR"]
        self.assertEqual(r.returncode, 1, r.stdout[-2000:] + r.stderr[-2000:])  # exp's cases fail
        neg = [c for c in data["cases"] if c["op"] == "aten::neg"]
        self.assertEqual(len(neg), 2, data["cases"])
        for c in neg:
            self.assertEqual((c["status"], c["flags"]), ("passed", []), c)
        self.assertIsNotNone([c for c in neg if c["variant"] == "traced"][0]["generated"])  # timed
        for c in (c for c in data["cases"] if c["op"] == "aten::exp"):
            self.assertEqual(c["status"], "failed", c)
            self.assertIn("this_is_not_declared", c["message"], c)


class ReplayWithAllowedAten(ReplayOfProgram):
    """A kernel written with torch ops is a native call unless the policy's allow_aten allows them; then it
    is judged, and every such case says which ATen ops it called (issue 15 item 4)."""
    PROGRAM = "import torch\ntorch.abs(torch.randn(64, 33))\ntorch.softmax(torch.randn(8, 33), -1)\n"

    def abs_cases(self, *args):
        data, r = self.replay("--backend", PY_BACKEND, "--ops", "aten::abs", "--device", "cpu",
                              "--variants", "traced,noncontiguous", *args)
        return [c for c in data["cases"] if c["op"] == "aten::abs"], r

    def test_strict_by_default_and_allowed_by_the_policy_with_a_note_on_every_case(self):
        cases, r = self.abs_cases()
        self.assertEqual(r.returncode, 1, r.stdout[-2000:])
        for c in cases:
            self.assertEqual((c["status"], c["flags"]), ("failed", ["native-call"]), c)
        policy = self.dir / "allow.yaml"
        policy.write_text("version: 1\ndefault: {allow_aten: all}\nops: {}\n")
        cases, r = self.abs_cases("--policy", policy)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
        self.assertEqual(len(cases), 2, cases)
        for c in cases:
            self.assertEqual((c["status"], c["flags"]), ("passed", []), c)
            self.assertEqual(c["aten_allowed"], ["aten::relu", "aten::neg", "aten::add.Tensor"], c)
        self.assertIn("kernels that call ATen compute ops, as the policy allows (allow_aten)", r.stdout)
        self.assertIn("aten::abs: aten::relu, aten::neg, aten::add.Tensor", r.stdout)

    def test_the_kernels_own_op_inside_an_allowed_op_is_still_a_native_call(self):
        # A _softmax kernel calling torch.softmax: softmax is allowed, the _softmax it runs inside is not.
        backend = self.dir / "own_op_inside"
        (backend / "_softmax__default").mkdir(parents=True)
        (backend / "_softmax__default" / "_softmax__default_implementation.py").write_text(
            "import torch\n\ndef _softmax__default_kernel_impl(x, dim, half_to_float):\n"
            "    return torch.softmax(x, dim)\n")
        policy = self.dir / "allow_all.yaml"
        policy.write_text("version: 1\ndefault: {allow_aten: all}\nops: {}\n")
        data, r = self.replay("--backend", backend, "--policy", policy, "--ops", "aten::_softmax", "--device", "cpu",
                              "--variants", "traced", "--check-only")
        cases = [c for c in data["cases"] if c["op"] == "aten::_softmax"]
        self.assertTrue(cases, r.stdout[-2000:] + r.stderr[-2000:])
        for c in cases:
            self.assertEqual((c["status"], c["flags"]), ("failed", ["native-call"]), c)
            self.assertIn("the kernel called aten::_softmax", c["message"], c)


if __name__ == "__main__":
    if not BRIDGE.exists():  # CMake found no Python headers (scripts/setup.sh installs python3-dev)
        print(f"skipped: {BRIDGE} was not built: CMake found no Python headers (python3-dev)")
        sys.exit(77)
    unittest.main()
