"""Runs the example training loop under torch.profiler(record_shapes=True) and writes, as JSON, how
often each (op, input shapes) was a leaf (called no other op) and how often it ran at all.

    python3 profile_example.py OUT.json [example args...]

trace_counts() computes the same two counters from a bbshim trace, keyed the same way.
"""
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def key(op, shapes):
    return op + " " + json.dumps(shapes, separators=(",", ":"))


def trace_counts(trace):
    """(leaf, total) Counters from a parsed trace, keyed like the profiler's events: the op without
    its overload, and per argument the tensor's shape or [] (the profiler records [] for tensor lists
    and every non-tensor)."""
    leaf, total = Counter(), Counter()
    for e in trace["ops"]:
        ns, _, rest = e["op"].partition("::")
        k = key(ns + "::" + rest.split(".")[0], [a["shape"] if a["kind"] == "tensor" else [] for a in e["args"]])
        leaf[k] += e["count"] - e["with_children"]
        total[k] += e["count"]
    return leaf, total


def main():
    from torch.profiler import ProfilerActivity, profile
    import train_small
    out, args = sys.argv[1], sys.argv[2:]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, acc_events=True) as prof:
        train_small.main(args + ["--quiet"])
    leaf, total = Counter(), Counter()
    for e in prof.events():
        if "::" not in e.name:
            continue
        k = key(e.name, e.input_shapes)
        total[k] += 1
        if not any("::" in c.name for c in e.cpu_children):
            leaf[k] += 1
    with open(out, "w") as f:
        json.dump({"leaf": leaf, "total": total}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
