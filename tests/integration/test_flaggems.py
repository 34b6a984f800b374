"""FlagGems as a backend folder (scripts/flaggems_backend.py), on the CPU with a stand-in package of the
same table form (tests/data/fake_flag_gems): the folder written per op of the table that torch has, each
call handed to the package's function, declined where the entry's condition is false, a failing function
falling back to native with its message, a folder written from another version refused by name, no folder
for what bbshim cannot route, and bbreplay judging the folder while the package writes under its home as
it imports. The real FlagGems needs a GPU: scripts/gpu-check runs it there."""
import importlib.util
import json
import unittest

from support import BUILD, PYTHON, ROOT, TempDirTest, base_env, preload_env, run
from test_routing import summary_row

FAKE = ROOT / "tests" / "data" / "fake_flag_gems"
ADAPTER = ROOT / "scripts" / "flaggems_backend.py"
PROGRAM = """
import torch
x = torch.tensor([-1.5, 0.0, 2.0])
print(torch.relu(x).tolist(), torch.add(x, x).tolist(), torch.neg(x).tolist())
"""


class FlagGemsBackend(TempDirTest):
    def home(self):
        """A home folder of the test's own: the stand-in, as FlagGems, makes a folder there when imported."""
        h = self.dir / "home"
        h.mkdir(exist_ok=True)
        return h

    def adapter(self, *args, pythonpath=FAKE):
        env = base_env()
        env["PYTHONPATH"], env["HOME"] = str(pythonpath), str(self.home())
        return run([PYTHON, ADAPTER, *args], env, cwd=self.dir, timeout=300)

    def route(self, backend, pythonpath=FAKE):
        summary = self.dir / "summary.txt"
        env = preload_env(BB_BACKEND=backend, BB_SUMMARY=summary, BB_TRACE="off", PYTHONPATH=pythonpath,
                          HOME=self.home())
        r = run([PYTHON, "-c", PROGRAM], env, cwd=self.dir, timeout=300)
        return r, summary.read_text() if summary.exists() else ""

    def test_the_table_becomes_a_backend_that_calls_its_functions(self):
        out = self.dir / "flaggems"
        r = self.adapter(out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("FlagGems 5.0.2", r.stdout)
        self.assertIn("3 ops written", r.stdout)
        self.assertIn("not ATen ops of this torch: no_such_op.default", r.stdout)
        self.assertIn("1 that bbshim cannot route (factories with a BackendSelect kernel): zeros", r.stdout)
        self.assertIn("1 that bbshim cannot route (CompositeImplicitAutograd: they decompose above the routing "
                      "point): linear", r.stdout)
        self.assertEqual(sorted(p.name for p in out.iterdir()), ["add__Tensor", "neg__default", "relu__default"])
        self.assertIn('OP, NAME, VERSION = "aten::add.Tensor", "add.Tensor", "5.0.2"',
                      (out / "add__Tensor" / "flaggems.py").read_text())

        r, s = self.route(out)
        self.assertEqual(r.returncode, 0, r.stderr)
        # what the program prints is native's wherever the kernel declined or failed, and relu's is right
        self.assertEqual(r.stdout.strip(), "[0.0, 0.0, 2.0] [-3.0, 0.0, 4.0] [1.5, -0.0, -2.0]")
        relu, add, neg = (summary_row(s, op) for op in ("aten::relu", "aten::add.Tensor", "aten::neg"))
        self.assertEqual((relu["calls"], relu["routed"], relu["errors"]), ("1", "1", "0"), s)
        self.assertEqual((add["routed"], add["declined"]), ("0", "1"), s)  # its condition is false
        self.assertEqual((neg["routed"], neg["errors"]), ("0", "1"), s)  # native ran instead
        self.assertIn("fake FlagGems: neg is broken", r.stderr)

        # Only the ops asked for; an unknown name is said.
        only = self.dir / "only"
        r = self.adapter(only, "--ops", "relu,nonsense")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([p.name for p in only.iterdir()], ["relu__default"])
        self.assertIn("nonsense is not in FlagGems 5.0.2's table", r.stderr)

    def test_bbreplay_judges_the_folder_with_the_package_writing_its_home_in_the_kernels_process(self):
        # The kernel's process may write no folder but its caches (namespaces make the rest read-only):
        # it gets a home of its own there, where FlagGems (and the stand-in) make a folder when imported.
        # With the user's home, read-only, every case failed with "Read-only file system" (H200, 2026-12-06).
        out = self.dir / "flaggems"
        self.assertEqual(self.adapter(out).returncode, 0)
        trace = self.dir / "trace.yaml"
        r = run([PYTHON, "-c", PROGRAM], preload_env(BB_TRACE=trace), cwd=self.dir, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        home = self.home()
        home.chmod(0o555)  # (read-only, as under namespaces, also where bbreplay falls back to a subreaper)
        try:
            env = base_env()
            env["PYTHONPATH"], env["HOME"] = str(FAKE), str(home)
            env["BB_CACHE"] = str(self.dir / "cache")  # (not under the read-only home)
            report = self.dir / "report.json"
            # (--device cpu: the stand-in computes on the CPU; on a GPU host bbreplay's default is CUDA, where
            # its relu declines: skipped, not passed, H100, 2026-12-07)
            r = run([BUILD / "bin" / "bbreplay", trace, "--backend", out, "--json", report, "--quiet",
                     "--variants", "traced", "--device", "cpu"], env, cwd=self.dir, timeout=600)
        finally:
            home.chmod(0o755)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        ops = {o["op"]: o for o in json.loads(report.read_text())["ops"]}
        self.assertNotIn("Read-only file system", r.stdout + r.stderr)
        self.assertEqual((ops["aten::relu"]["passed"], ops["aten::relu"]["failed"]), (1, 0), ops["aten::relu"])
        self.assertEqual(ops["aten::neg"]["failed"], 1, ops["aten::neg"])  # (its function raises)

    def test_another_version_is_refused_by_name_and_native_runs(self):
        out = self.dir / "flaggems"
        self.assertEqual(self.adapter(out, "--ops", "relu").returncode, 0)
        newer = self.dir / "newer"
        (newer / "flag_gems").mkdir(parents=True)
        source = (FAKE / "flag_gems" / "__init__.py").read_text().replace('"5.0.2"', '"5.1.0"')
        (newer / "flag_gems" / "__init__.py").write_text(source)
        r, s = self.route(out, pythonpath=newer)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("[0.0, 0.0, 2.0]"), r.stdout)
        self.assertIn("flag_gems 5.1.0 is installed, this folder was written from flag_gems 5.0.2", r.stderr + s)
        self.assertEqual(summary_row(s, "aten::relu")["routed"], "0", s)

    def test_a_missing_package_or_table_says_what(self):
        if importlib.util.find_spec("flag_gems") is None:  # (where FlagGems is installed, it is found)
            r = self.adapter(self.dir / "out", pythonpath=self.dir)
            self.assertEqual(r.returncode, 1)
            self.assertIn("flag_gems is not installed", r.stderr)
        broken = self.dir / "broken"
        (broken / "flag_gems").mkdir(parents=True)
        (broken / "flag_gems" / "__init__.py").write_text('__version__ = "9.0"\n_FULL_CONFIG = (\n    relu,\n)\n')
        r = self.adapter(self.dir / "out", pythonpath=broken)
        self.assertEqual(r.returncode, 1)
        self.assertIn("flag_gems/__init__.py:3:5: an entry of _FULL_CONFIG", r.stderr)


if __name__ == "__main__":
    unittest.main()
