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

from profile_example import trace_counts
from support import HERE, PYTHON, TempDirTest, load_trace, preload_env, run


def profile_and_trace(test, *example_args):
    """Runs the example once, traced and profiled; returns (profiler, trace) counters (leaf, total)."""
    trace_path, prof_path = test.dir / "t.yaml", test.dir / "prof.json"
    r = run([PYTHON, HERE / "profile_example.py", prof_path, *example_args], preload_env(BB_TRACE=trace_path))
    test.assertEqual(r.returncode, 0, r.stderr)
    prof = json.loads(prof_path.read_text())
    ops_only = lambda c: Counter({k: v for k, v in c.items() if k.startswith("aten::")})  # noqa: E731
    return (ops_only(prof["leaf"]), ops_only(prof["total"])), trace_counts(load_trace(trace_path))


class ProfilerOracle(TempDirTest):
    def test_leaf_signatures_and_counts_match_torch_profiler(self):
        (prof_leaf, prof_total), (ours_leaf, ours_total) = profile_and_trace(self, "--steps", "2")
        self.assertGreater(len(prof_leaf), 100)  # the comparison has substance
        self.assertEqual(prof_leaf, +ours_leaf)  # same leaf signatures, same counts
        self.assertEqual(set(prof_total), set(ours_total))
        for k in prof_total:
            self.assertGreaterEqual(ours_total[k], prof_total[k], k)


if __name__ == "__main__":
    unittest.main()
