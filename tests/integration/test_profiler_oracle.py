"""torch's own profiler is the oracle: the same program, traced by the preload and profiled by
torch.profiler(record_shapes=True) in one run, must show the same leaf ops with the same input shapes
the same number of times.

Where the two differ by design, the comparison follows the profiler's conventions:
- it records tensor lists as [] (the trace records each tensor), so lists compare as [];
- it folds a child op into a parent of the same name (EventList._remove_dup_nodes), so total counts
  may be lower in the profiler, never higher; leaf counts are exact;
- autograd::engine::evaluate_function records are not ATen ops and are not traced.
"""
import json
import unittest
from collections import Counter

from support import EXAMPLE, HERE, PYTHON, TempDirTest, load_trace, preload_env, run


def key(op, shapes):
    return op + " " + json.dumps(shapes, separators=(",", ":"))


def trace_shape(arg):
    return arg["shape"] if arg["kind"] == "tensor" else []


def base_name(op):
    ns, _, rest = op.partition("::")
    return ns + "::" + rest.split(".")[0]


class ProfilerOracle(TempDirTest):
    def test_leaf_signatures_and_counts_match_torch_profiler(self):
        trace_path, prof_path = self.dir / "t.yaml", self.dir / "prof.json"
        r = run([PYTHON, HERE / "profile_example.py", prof_path, "--steps", "2"], preload_env(BB_TRACE=trace_path))
        self.assertEqual(r.returncode, 0, r.stderr)
        prof = json.loads(prof_path.read_text())
        prof_leaf = Counter({k: v for k, v in prof["leaf"].items() if k.startswith("aten::")})
        prof_total = Counter({k: v for k, v in prof["total"].items() if k.startswith("aten::")})

        ours_leaf, ours_total = Counter(), Counter()
        for e in load_trace(trace_path)["ops"]:
            k = key(base_name(e["op"]), [trace_shape(a) for a in e["args"]])
            ours_leaf[k] += e["count"] - e["with_children"]
            ours_total[k] += e["count"]

        self.assertGreater(len(prof_leaf), 100)  # the comparison has substance
        self.assertEqual(set(prof_leaf), {k for k, v in ours_leaf.items() if v})
        for k in prof_leaf:
            self.assertEqual(ours_leaf[k], prof_leaf[k], k)
        self.assertEqual(set(prof_total), set(ours_total))
        for k in prof_total:
            self.assertGreaterEqual(ours_total[k], prof_total[k], k)
        self.assertEqual(sum(prof_leaf.values()), sum(ours_leaf.values()))


if __name__ == "__main__":
    unittest.main()
