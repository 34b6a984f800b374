"""bbcompare end to end on the CPU: the example model natively, routed to the sample backend and in
shadow mode (metric curves must match, routing must have happened), and bad input: a run that
crashes, a metric that never matches, a backend that does not load, bad usage."""
import json
import sys
import textwrap
import unittest

from support import BUILD, EXAMPLE, PYTHON, ROOT, TempDirTest, base_env, run

BBCOMPARE = BUILD / "bin" / "bbcompare"
BACKEND = ROOT / "backends" / "cpu_reference"
LOSS = r"loss ([0-9.eE+-]+)"
# A policy with the tolerances of a float32 training run (the shadow comparison's default is
# torch.testing's 1.3e-6, which a kernel summing in another order can exceed on a few elements).
POLICY = """version: 1
default:
  tolerance: {float32: {rtol: 1.0e-4, atol: 1.0e-5}}
ops:
"""


def page_tools():
    try:
        import plotly  # noqa: F401
        return True
    except ImportError:
        return False


class CompareExample(TempDirTest):
    """The example model, 5 steps, native against cpu_reference, with shadow mode."""

    def test_example_matches_and_routes(self):
        policy = self.dir / "policy.yaml"
        ops = sorted(f"aten::{p.name.rpartition('__')[0]}" + ("" if p.name.endswith("__default") else
                                                                "." + p.name.rpartition("__")[2])
                     for p in BACKEND.iterdir() if p.is_dir() and "__" in p.name)
        policy.write_text(POLICY + "".join(f"  {op}: {{}}\n" for op in ops))
        out = self.dir / "report.json"
        html = self.dir / "report.html"
        cmd = [BBCOMPARE, "--backend", BACKEND, "--policy", policy, "--shadow", "--metric", LOSS, "--json", out,
               "--quiet", "--", PYTHON, EXAMPLE, "--steps", "5"]
        if page_tools():
            cmd[1:1] = ["--html", html]
        r = run(cmd, base_env(), timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rep = json.loads(out.read_text())
        self.assertEqual(rep["schema"], "bbcompare-report")
        self.assertEqual(rep["problems"], [])
        self.assertGreater(rep["routing"]["routed_calls"], 0)
        self.assertIn("calls routed", r.stdout)
        metric = rep["metrics"][0]
        self.assertEqual([len(s["values"]) for s in metric["series"].values()], [5, 5, 5])
        for mode in ("routed", "shadow"):
            self.assertTrue(metric["compared"][mode]["matches"], metric)
        # Routed calls show in the routed run's trace too, per signature.
        self.assertTrue(any(o["routed"]["routed"] for o in rep["ops"]), rep["ops"][:3])
        self.assertTrue(rep["shadow"], "shadow mode compared nothing")
        for op, s in rep["shadow"].items():
            self.assertEqual(s["mismatched"], 0, (op, s))
            self.assertIn("max_abs", s)
        self.assertEqual({r["mode"] for r in rep["runs"]}, {"native", "routed", "shadow"})
        if page_tools():
            self.assertIn("Plotly.newPlot", html.read_text())


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


# Prints three losses; in a routed run (BB_BACKEND set) it stops after two with SIGABRT, after torch ran
# ops, so the preload's crash handler writes a trace.
CRASHER = """
import os, torch
x = torch.ones(4)
for step in range(3):
    x = torch.relu(x * 0.5)
    print(f"step {step}: loss {float(x.sum()):.6f}", flush=True)
    if step == 1 and os.environ.get("BB_BACKEND"):
        print("crashing on purpose", flush=True, file=__import__("sys").stderr)
        os.abort()
"""


class CompareBadInput(TempDirTest):
    def compare(self, *args, program=None, expect=1):
        out = self.dir / "report.json"
        prog = write(self.dir / "prog.py", program or CRASHER)
        r = run([BBCOMPARE, "--json", out, "--quiet", *args, "--", PYTHON, prog], base_env(), timeout=300)
        self.assertEqual(r.returncode, expect, r.stdout + r.stderr)
        return (json.loads(out.read_text()) if out.exists() else None), r

    def test_crash_in_one_run(self):
        rep, r = self.compare("--backend", BACKEND, "--metric", LOSS)
        bad = [x for x in rep["runs"] if not x["ok"]]
        self.assertEqual([(x["mode"], x["ended"]) for x in bad], [("routed", "killed by SIGABRT")])
        self.assertIn("crashing on purpose", bad[0]["stderr_tail"])
        self.assertIn("routed run 1: killed by SIGABRT", rep["problems"])
        self.assertIn("routed run 1 failed: killed by SIGABRT", r.stdout)
        # What it measured is still there: its two losses (matching native's first two), its wall time,
        # and the ops of the trace the preload wrote as it crashed.
        m = rep["metrics"][0]
        self.assertEqual(len(m["series"]["routed"]["values"]), 2)
        self.assertEqual(m["series"]["routed"]["values"], m["series"]["native"]["values"][:2])
        self.assertEqual(m["compared"]["routed"]["first_divergence"], 2)
        self.assertGreater(bad[0]["wall_s"], 0)
        relu = [o for o in rep["ops"] if o["op"] == "aten::relu"]
        self.assertTrue(relu and relu[0]["routed"]["calls"] >= 2, rep["ops"])

    def test_metric_never_matches(self):
        rep, r = self.compare("--backend", BACKEND, "--metric", r"accuracy ([0-9.]+)",
                              program="print('step 0: loss 1.0')\n")
        self.assertIn("metric 'accuracy ([0-9.]+)' matched nothing in any run's output", rep["problems"])
        self.assertIn("matched nothing", r.stdout)

    def test_backend_that_does_not_load(self):
        broken = self.dir / "broken"
        (broken / "relu__default").mkdir(parents=True)
        write(broken / "relu__default" / "relu.cpp", "this is not C++\n")
        rep, r = self.compare("--backend", broken, "--metric", LOSS, program=CRASHER.replace("os.abort()", "pass"))
        self.assertEqual(rep["routing"]["routed_calls"], 0)
        problem = [p for p in rep["problems"] if p.startswith("no call was routed")]
        self.assertTrue(problem, rep["problems"])
        self.assertIn("[bbshim]", problem[0])  # the preload's own words about the broken kernel
        self.assertTrue(rep["metrics"][0]["compared"]["routed"]["matches"])

    def test_usage_errors(self):
        for args, words in ((["--backend", self.dir / "missing"], "not a folder"),
                            (["--metric", "(", "--backend", BACKEND], "--metric"),
                            ([], "--backend or --policy")):
            _, r = self.compare(*args, expect=2)
            self.assertIn(words, r.stderr)


if __name__ == "__main__":
    sys.exit(unittest.main())
