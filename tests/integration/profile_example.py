"""Runs the example training loop under torch.profiler(record_shapes=True) and writes, as JSON, how
often each (op, input shapes) was a leaf (called no other op) and how often it ran at all.

    python3 profile_example.py OUT.json [example args...]
"""
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import train_small  # noqa: E402


def shapes_key(shapes):
    return json.dumps(shapes, separators=(",", ":"))


def main():
    out, args = sys.argv[1], sys.argv[2:]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, acc_events=True) as prof:
        train_small.main(args + ["--quiet"])
    leaf, total = Counter(), Counter()
    for e in prof.events():
        if "::" not in e.name:
            continue
        key = e.name + " " + shapes_key(e.input_shapes)
        total[key] += 1
        if not any("::" in c.name for c in e.cpu_children):
            leaf[key] += 1
    with open(out, "w") as f:
        json.dump({"leaf": leaf, "total": total}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
