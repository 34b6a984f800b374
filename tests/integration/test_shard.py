"""A run in parts: bbreplay --shard K/N and bbreplay merge give the report of one run, case by case; bad
parts, parts of different runs and missing parts are refused by name and nothing is written; bbtrace
merge makes one trace of a program's ranks that bbreplay replays. CPU only."""
import json
import shutil
import tempfile
import unittest
from pathlib import Path

import yaml

from support import BBTRACE, BUILD, PYTHON, ROOT, base_env, preload_env, run, trace_example

BBREPLAY = BUILD / "bin" / "bbreplay"
# A few ops of the example's trace, every variant: enough cases for three parts, seconds to check.
OPS = "relu,addmm,native_layer_norm,_softmax,add.Tensor,gelu,embedding,mm,sum.dim_IntList"
COMPARED = ("op", "signature", "variant", "calls", "status", "flags", "message", "max_abs_error")


def cases(report):
    return [{k: c[k] for k in COMPARED} for c in report["cases"]]


def same_run(test, merged, single):
    """The merged report is the single run's, case by case and in every figure (timings aside)."""
    test.assertEqual(cases(merged), cases(single))
    test.assertEqual(merged["overall"], single["overall"])
    test.assertEqual(merged["coverage"], single["coverage"])
    test.assertEqual([{k: v for k, v in o.items() if not k.endswith("_us")} for o in merged["ops"]],
                     [{k: v for k, v in o.items() if not k.endswith("_us")} for o in single["ops"]])


class Run:
    """The example's trace, replayed once whole and once in 3 parts, for every test of this file."""
    dir = trace = single = parts = None


def replay(*args, expect=(0,), ops=OPS):
    r = run([BBREPLAY, Run.trace, "--device", "cpu", "--check-only", "--ops", ops, *args], base_env(), timeout=600)
    assert r.returncode in expect, r.stdout + r.stderr
    out = args[args.index("--json") + 1] if "--json" in args else None
    return json.loads(Path(out).read_text()) if out and r.returncode != 2 else r


def setUpModule():
    Run.dir = Path(tempfile.mkdtemp(prefix="bbshim-shard-"))
    Run.trace = trace_example(Run.dir)
    Run.single = replay("--json", Run.dir / "single.json")
    Run.parts = [Run.dir / f"part{k}.json" for k in range(3)]
    for k, part in enumerate(Run.parts):
        replay("--shard", f"{k}/3", "--json", part)


def tearDownModule():
    shutil.rmtree(Run.dir, ignore_errors=True)


class Shards(unittest.TestCase):
    dir = property(lambda self: Run.dir)
    trace = property(lambda self: Run.trace)
    single = property(lambda self: Run.single)
    parts = property(lambda self: Run.parts)

    def replay(self, *args, expect=(0,), ops=OPS):
        return replay(*args, expect=expect, ops=ops)

    def merge(self, *parts, out=None, expect=0):
        out = out or self.dir / "merged.json"
        r = run([BBREPLAY, "merge", *parts, "--json", out, "--csv", self.dir / "merged.csv"], base_env())
        self.assertEqual(r.returncode, expect, r.stdout + r.stderr)
        return r

    def test_merged_parts_are_the_single_run(self):
        self.merge(*reversed(self.parts))  # in any order
        merged = json.loads((self.dir / "merged.json").read_text())
        self.assertGreater(len(merged["cases"]), 30)
        same_run(self, merged, self.single)
        self.assertNotIn("part", merged)
        self.assertIn("run in 3 parts", merged["meta"]["timing"])

    def test_parts_are_disjoint_balanced_and_say_what_they_are(self):
        parts = [json.loads(p.read_text())["part"] for p in self.parts]
        self.assertEqual([p["k"] for p in parts], [0, 1, 2])
        assigned = sorted(i for p in parts for i in p["assigned"])
        self.assertEqual(assigned, list(range(len(self.single["cases"]))))
        costs = [p["estimated_cost_us"] for p in parts]
        self.assertLess(max(costs), 1.5 * sum(costs) / 3, costs)
        # the same K/N selects the same cases
        again = self.replay("--shard", "1/3", "--json", self.dir / "again.json")
        self.assertEqual(again["part"]["assigned"], parts[1]["assigned"])
        listed = self.replay("--shard", "1/3", "--list")
        self.assertEqual(len(listed.stdout.splitlines()), len(parts[1]["assigned"]))

    def test_missing_duplicated_and_foreign_parts_are_refused_and_nothing_is_written(self):
        out = self.dir / "refused.json"
        r = self.merge(self.parts[0], self.parts[2], out=out, expect=2)
        self.assertIn("missing part 1/3", r.stderr)
        r = self.merge(self.parts[0], self.parts[1], self.parts[1], self.parts[2], out=out, expect=2)
        self.assertIn("is given twice", r.stderr)
        other = self.dir / "seed1.json"
        self.replay("--seed", "1", "--shard", "1/3", "--json", other)
        r = self.merge(self.parts[0], other, self.parts[2], out=out, expect=2)
        self.assertIn(f"{other} is not a part of the same run as {self.parts[0]}: their seed differs", r.stderr)
        self.assertFalse(out.exists())

    def test_bad_part_files_and_settings(self):
        out = self.dir / "bad.json"
        text = self.parts[1].read_text()
        truncated = self.dir / "truncated.json"
        truncated.write_text(text[: len(text) // 2])
        r = self.merge(self.parts[0], truncated, self.parts[2], out=out, expect=2)
        self.assertIn(f"{truncated}: not JSON", r.stderr)
        r = self.merge(self.parts[0], self.trace, out=out, expect=2)  # a YAML trace is no part
        self.assertIn(f"{self.trace}: not JSON", r.stderr)
        r = self.merge(self.parts[0], self.dir / "single.json", out=out, expect=2)
        self.assertIn("the report of a whole run, not a part", r.stderr)
        r = self.merge(self.parts[0], self.dir / "nothing.json", out=out, expect=2)
        self.assertIn("nothing.json", r.stderr)
        self.assertFalse(out.exists())
        for shard, says in (("0/0", "at least 1"), ("3/3", "must be below N = 3"), ("1", "expected K/N"),
                            ("-1/3", "expected K/N")):
            r = self.replay("--shard", shard, "--json", out, expect=(2,))
            self.assertIn(says, r.stderr, shard)
        r = self.replay("--shard", "0/3", expect=(2,))
        self.assertIn("--shard needs --json", r.stderr)
        self.assertFalse(out.exists())

    def test_more_parts_than_cases(self):
        # a part with no case is a part all the same: the merge is complete
        one = ["--variants", "traced"]
        single = self.replay(*one, "--json", self.dir / "relu.json", ops="relu")
        n = len(single["cases"]) + 2
        parts = [self.dir / f"relu{k}.json" for k in range(n)]
        for k, p in enumerate(parts):
            self.replay(*one, "--shard", f"{k}/{n}", "--json", p, ops="relu")
        self.merge(*parts, out=self.dir / "relu-merged.json")
        same_run(self, json.loads((self.dir / "relu-merged.json").read_text()), single)


# sbatch as Slurm would run the scripts, at once: an array's tasks one after another with
# SLURM_ARRAY_TASK_ID/COUNT set, then the job that depends on it. Each call is logged.
FAKE_SBATCH = r"""#!/bin/bash
echo "$@" >> "$FAKE_SLURM/log"
array=""
for a in "$@"; do
  case $a in --array=*) array=${a#--array=} ;; --*) ;; *) script=$a ;; esac
done
if [ -n "$array" ]; then
  lo=${array%-*} hi=${array#*-}
  for ((k = lo; k <= hi; k++)); do
    SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=$((hi - lo + 1)) bash "$script" > "$FAKE_SLURM/task-$k.out" 2>&1
    echo $? > "$FAKE_SLURM/task-$k.rc"
  done
  echo "1234;cluster"
else
  bash "$script" > "$FAKE_SLURM/merge.out" 2>&1
  echo $? > "$FAKE_SLURM/merge.rc"
  echo 1235
fi
"""


class Slurm(unittest.TestCase):
    def test_the_array_and_its_merge_give_the_single_run(self):
        bin_ = Run.dir / "fake-bin"
        bin_.mkdir()
        (bin_ / "sbatch").write_text(FAKE_SBATCH)
        (bin_ / "sbatch").chmod(0o755)
        env = base_env()
        env["PATH"] = f"{bin_}:{env['PATH']}"
        env["FAKE_SLURM"] = str(Run.dir)
        env["BB_BBREPLAY"] = str(BBREPLAY)
        out = Run.dir / "slurm-run"
        r = run([ROOT / "scripts" / "slurm" / "submit", "3", Run.trace, out, "--device", "cpu", "--check-only",
                 "--ops", OPS], env, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("merge: job 1235", r.stdout)
        log = (Run.dir / "log").read_text().splitlines()
        self.assertIn("--array=0-2", log[0])
        self.assertIn("--dependency=afterany:1234", log[1])  # the id without its cluster
        for k in range(3):
            self.assertEqual((Run.dir / f"task-{k}.rc").read_text().strip(), "0",
                             (Run.dir / f"task-{k}.out").read_text())
        self.assertEqual((Run.dir / "merge.rc").read_text().strip(), "0", (Run.dir / "merge.out").read_text())
        same_run(self, json.loads((out / "report.json").read_text()), Run.single)
        self.assertTrue((out / "report.md").is_file() and (out / "report.csv").is_file())
        # an array not started at 0 is refused by bbreplay, not run as parts of another split
        env["SLURM_ARRAY_TASK_ID"], env["SLURM_ARRAY_TASK_COUNT"] = "3", "3"
        env["BB_TRACE"], env["BB_OUT"] = str(Run.trace), str(Run.dir / "one-based")
        r = run(["bash", ROOT / "scripts" / "slurm" / "bbreplay.sbatch"], env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("K counts from 0", r.stderr)


class TraceMerge(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="bbshim-tmerge-"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_ranks_merge_into_one_trace_that_replays(self):
        program = "import sys, torch; [torch.relu(torch.randn(8)) for _ in range(int(sys.argv[1]))]; torch.ones(3) + 1"
        for rank, calls in ((0, 2), (1, 5)):
            r = run([PYTHON, "-c", program, str(calls)], preload_env(RANK=rank, WORLD_SIZE=2), cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
        ranks = sorted(self.dir.glob("bbtrace.rank*.yaml"))
        self.assertEqual(len(ranks), 2)
        out = self.dir / "all.yaml"
        r = run([BBTRACE, "merge", *ranks, "-o", out], base_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        merged = yaml.safe_load(out.read_text())
        inputs = [yaml.safe_load(p.read_text()) for p in ranks]
        relu = [e for e in merged["ops"] if e["op"] == "aten::relu"]
        self.assertEqual([e["count"] for e in relu], [7])  # one signature, counts summed
        self.assertEqual(merged["meta"]["calls"], sum(t["meta"]["calls"] for t in inputs))
        self.assertEqual([p["rank"] for p in merged["meta"]["merged_from"]], [0, 1])
        self.assertEqual([p["pid"] for p in merged["meta"]["merged_from"]], [t["meta"]["pid"] for t in inputs])
        r = run([BBREPLAY, out, "--device", "cpu", "--check-only", "--ops", "relu"], base_env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # the same trace twice is refused, and nothing is written
        r = run([BBTRACE, "merge", ranks[0], ranks[0], "-o", self.dir / "twice.yaml"], base_env())
        self.assertEqual(r.returncode, 2)
        self.assertIn("the same process", r.stderr)
        self.assertFalse((self.dir / "twice.yaml").exists())


if __name__ == "__main__":
    unittest.main()
