"""TorchBench operator-input logs: the importer reads every file of the format it is given — PyTorch's
published logs (tests/data/torchbench) and logs an independent writer makes from other models — and
converts to and from bbshim's YAML without losing a signature."""
import re
import unittest
from collections import Counter

import yaml
from pathlib import Path

from support import BBTRACE, HERE, PYTHON, ROOT, TempDirTest, base_env, preload_env, run

DATA = ROOT / "tests" / "data" / "torchbench"


def expected_counts(path):
    """(total calls, distinct signatures) by plain text processing of the log."""
    lines, op = Counter(), None
    for line in path.read_text().splitlines():
        if line.startswith("Operator: "):
            op = line[10:].replace("aten.sum.SymInt", "aten.sum.dim_IntList")
        elif line.startswith("cnt: "):
            n, rest = line[5:].split(",", 1)
            lines[(op, rest.strip())] += int(n)
    return sum(lines.values()), len(lines)


class TorchBench(TempDirTest):
    def check_log(self, path):
        calls, signatures = expected_counts(path)
        r = run([BBTRACE, "summary", path], base_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{calls} calls, {signatures} signatures", r.stdout)
        # TorchBench -> YAML -> TorchBench -> YAML loses nothing.
        a, b, c = self.dir / "a.yaml", self.dir / "b.txt", self.dir / "c.yaml"
        for src, dst in ((path, a), (a, b), (b, c)):
            r = run([BBTRACE, "convert", src, dst], base_env())
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(yaml.safe_load(a.read_text())["ops"], yaml.safe_load(c.read_text())["ops"])
        return calls

    def test_pytorch_published_logs(self):
        files = sorted(DATA.glob("*.txt"))
        self.assertEqual(len(files), 2)
        for f in files:
            with self.subTest(log=f.name):
                self.check_log(f)

    def test_logs_written_by_another_writer_for_other_models(self):
        r = run([PYTHON, HERE / "torchbench_log.py", self.dir], base_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        made = [line.split() for line in r.stdout.splitlines()]
        self.assertEqual(len(made), 3)
        for path, total in made:
            with self.subTest(log=path):
                self.assertEqual(self.check_log(Path(path)), int(total))

    def test_a_trace_of_ours_converts_to_a_log(self):
        trace = self.dir / "t.yaml"
        r = run([PYTHON, ROOT / "examples" / "train_small.py", "--steps", "1", "--quiet"], preload_env(BB_TRACE=trace))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.dir / "t.txt"
        r = run([BBTRACE, "convert", trace, out], base_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        text = out.read_text()
        self.assertRegex(text, r"(?m)^Operator: aten\.addmm\.default$")
        # The transposed weight keeps its stride; keyword-only arguments go to the keyword dict.
        self.assertRegex(text, r"(?m)^cnt: \d+, \(\(T\(\[\d+\], f32\), T\(\[\d+, \d+\], f32\), T\(\[\d+, \d+\], f32, "
                               r"stride=\(1, \d+\)\)\), \{'beta': 1, 'alpha': 1\}\)$")

    def test_a_malformed_log_is_exit_2_with_the_position(self):
        bad = self.dir / "bad.txt"
        bad.write_text("Operator: aten.relu.default\ncnt: 1, ((T([2], f32),), {}\n")
        r = run([BBTRACE, "summary", bad], base_env())
        self.assertEqual((r.returncode, r.stderr), (2, f"bbtrace: {bad}:2:28: expected ',' or ')'\n"))


if __name__ == "__main__":
    unittest.main()
