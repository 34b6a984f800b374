"""bbcompare's HTML pages in a real headless browser (Chromium): they render without script errors and
show their plots, offline. Screenshots are kept in build/test-artifacts/ for a person to look at.

Pages: a comparison made from runs with device time (traces as the preload writes them on CUDA, made
here), and a bbreplay report (tests/golden/report.json). A page with a script error must be caught:
the check is run on one too."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

from support import BUILD, ROOT, TempDirTest

sys.path.insert(0, str(ROOT / "compare"))
ARTIFACTS = BUILD / "test-artifacts"


def browser():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing():
    """What this test needs and lacks: CI installs both (scripts/setup.sh), so there it fails instead."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        return "plotly is not installed in this Python"
    return None if browser() else "no chromium on PATH (apt-get install chromium)"


def chromium(*args, timeout=180):
    cmd = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
           "--enable-logging=stderr", "--v=0", *map(str, args)]
    env = dict(os.environ, HOME=os.environ.get("TMPDIR", "/tmp"))
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def console_errors(stderr):
    """Lines where the page's console reported an error (an uncaught exception, a failed load)."""
    return [line for line in stderr.splitlines() if "CONSOLE" in line and re.search(r"Uncaught|Error", line)]


def render(page, shot=None):
    """(plots drawn, script errors, console errors) of `page` as Chromium ran it; a screenshot too."""
    r = chromium("--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    plots = re.search(r'data-plots="(\d+)"', r.stdout)
    errors = re.search(r'data-script-errors="(\d+)"', r.stdout)
    if shot:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        chromium("--virtual-time-budget=10000", "--window-size=1280,3000", f"--screenshot={shot}", page.as_uri())
    return (int(plots.group(1)) if plots else 0, int(errors.group(1)) if errors else None,
            console_errors(r.stderr))


def trace(ops):
    """A trace as the preload writes one on CUDA: entries with device_time and routed counts."""
    entries = []
    for op, shape, count, routed, ns in ops:
        entries.append({"op": op, "count": count, "routed": routed,
                        "args": [{"name": "self", "kind": "tensor", "dtype": "float32", "shape": shape}],
                        "device_time": {"calls": count, "total_ns": ns}})
    return {"version": 1, "meta": {}, "ops": entries}


SUMMARY = """routing summary: backend backends/cuda_example
  op                                     mode     calls    routed  declined   unmet  passed  errors  native  mismatch
  aten::relu                            route        20        18         2       0       0       0       0         -
  aten::addmm                           route        40        40         0       0       0       0       0         -
"""
SHADOW = """routing summary: backend backends/cuda_example, policy shadow.yaml
  op                                     mode     calls    routed  declined   unmet  passed  errors  native  mismatch
  aten::relu                           shadow        20         0         0       0       0       0       0      0/20
  aten::addmm                          shadow        40         0         0       0       0       0       0      3/40
  aten::addmm shadow mismatch (float32[64,256]) output 0: float32[64,256]: 2 of 16384 elements differ
  aten::relu: shadow largest error: abs 0, rel 0; first out of tolerance: none
  aten::addmm: shadow largest error: abs 0.002, rel 0.0003; first out of tolerance: compared call 7
"""


def synthetic_report():
    import bbcompare
    native = trace([("aten::relu", [64, 256], 20, 0, 90000), ("aten::addmm", [64, 256], 40, 0, 400000),
                    ("aten::mul.Tensor", [64], 10, 0, 5000)])
    routed = trace([("aten::relu", [64, 256], 20, 18, 60000), ("aten::addmm", [64, 256], 40, 40, 520000),
                    ("aten::mul.Tensor", [64], 10, 0, 5000)])
    runs = []
    for i in range(2):
        for mode, tr, summ in (("native", native, ""), ("routed", routed, SUMMARY), ("shadow", native, SHADOW)):
            out = "".join(f"step {s}: loss {2.0 / (s + 1) + (1e-7 * s if mode == 'routed' else 0):.9f}\n"
                          for s in range(20))
            runs.append({"mode": mode, "index": i, "exit": 0, "ended": "exit status 0", "ok": True,
                         "wall_s": 2.0 + 0.1 * i + (0.3 if mode == "routed" else 0), "stdout": out, "stderr": "",
                         "stderr_tail": "", "trace": tr, "summary": summ})
    runs[4].update(ok=False, exit=-6, ended="killed by SIGABRT", stderr_tail="crashing on purpose")
    args = argparse.Namespace(command=["python3", "train.py"], backend="backends/cuda_example", policy=None,
                              runs=2, metric=[r"loss ([0-9.]+)"], rtol=1e-3, atol=1e-6)
    return bbcompare.build_report(args, ["native", "routed", "shadow"], runs)


class Analysis(unittest.TestCase):
    """The report made from those runs: what the pages draw."""

    def test_report_of_synthetic_runs(self):
        rep = synthetic_report()
        self.assertEqual([o["op"] for o in rep["ops"]], ["aten::addmm", "aten::relu", "aten::mul.Tensor"])
        self.assertEqual([o["routed"]["gain_ns"] for o in rep["ops"]], [-120000, 30000, 0])
        self.assertEqual(rep["routing"]["routed_calls"], 58)
        self.assertEqual(rep["routing"]["ops"]["aten::relu"]["declined"], 2)
        self.assertEqual(rep["shadow"]["aten::addmm"]["first_mismatch_call"], 7)
        self.assertEqual(rep["shadow"]["aten::addmm"]["max_abs"], 0.002)
        self.assertIsNone(rep["shadow"]["aten::relu"]["first_mismatch_call"])
        e2e = rep["end_to_end"]
        self.assertEqual(e2e["routed"]["succeeded"], 1)  # its second run crashed
        self.assertAlmostEqual(e2e["routed"]["wall_speedup"]["median"], 2.05 / 2.3)
        self.assertAlmostEqual(e2e["routed"]["device_speedup"]["median"], 495000 / 585000)
        self.assertTrue(rep["metrics"][0]["compared"]["routed"]["matches"])
        self.assertIn("routed run 2: killed by SIGABRT", rep["problems"])
        self.assertIn("shadow mismatches in aten::addmm", rep["problems"])


@unittest.skipIf(missing() and not os.environ.get("CI"), missing())
class Pages(TempDirTest):
    def test_compare_page_renders(self):
        import page
        rep = synthetic_report()
        html = self.dir / "compare.html"
        html.write_text(page.compare_page(rep))
        self.assertNotRegex(html.read_text(), r'<script[^>]+src=|<link[^>]+href="http', "the page loads something")
        plots, errors, console = render(html, ARTIFACTS / "compare_page.png")
        # wall times, the metric, routing per op, device time per op, cumulative gain, shadow errors
        self.assertEqual((plots, errors, console), (6, 0, []))

    def test_replay_page_renders(self):
        html = self.dir / "replay.html"
        r = subprocess.run([sys.executable, str(ROOT / "compare" / "bbcompare.py"), "--replay",
                            str(ROOT / "tests" / "golden" / "report.json"), "--html", str(html)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        plots, errors, console = render(html, ARTIFACTS / "replay_page.png")
        self.assertEqual((plots, errors, console), (3, 0, []))

    def test_a_script_error_is_caught(self):
        import page
        html = self.dir / "broken.html"
        text = page.compare_page(synthetic_report())
        html.write_text(text.replace("<h1>", "<script>undefinedFunction();</script><h1>", 1))
        plots, errors, console = render(html)
        self.assertEqual(errors, 1)
        self.assertTrue(any("undefinedFunction" in line for line in console), console)

    def test_not_a_replay_report(self):
        bad = self.dir / "x.json"
        bad.write_text(json.dumps({"schema": "other"}))
        r = subprocess.run([sys.executable, str(ROOT / "compare" / "bbcompare.py"), "--replay", str(bad), "--html",
                            str(self.dir / "x.html")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a bbreplay JSON report", r.stderr)


if __name__ == "__main__":
    sys.exit(unittest.main())
