"""What the runs measured, as data: end to end, metrics step by step, routing per op, device time per
op and signature, shadow-mode errors. Reads the traces the preload wrote (docs/trace-format.md) and
its routing summary (docs/policy.md, "The summary")."""
import re
import statistics

SUMMARY_COLUMNS = ["calls", "routed", "declined", "unmet", "passed", "errors", "native"]
ROW = re.compile(r"^\s+(aten::\S+)\s+(route|shadow|off)\s+" + r"\s+".join([r"(\d+)"] * 7) + r"\s+(\S+)\s*$")
LARGEST = re.compile(r"^\s+(aten::\S+): shadow largest error: abs (\S+), rel (\S+); first out of tolerance: "
                     r"(?:compared call (\d+)|none)\s*$")
MISMATCH = re.compile(r"^\s+(aten::\S+) shadow mismatch (.*)$")


def parse_summary(text):
    """The routing summary's table and notes: {op: {mode, calls, routed, ..., mismatched, compared,
    max_abs, max_rel, first_mismatch_call, mismatches: [text]}}."""
    ops = {}
    for line in text.splitlines():
        if m := ROW.match(line):
            row = {"mode": m.group(2), **{c: int(v) for c, v in zip(SUMMARY_COLUMNS, m.groups()[2:9])}}
            mm = m.group(10)
            if "/" in mm:
                row["mismatched"], row["compared"] = (int(x) for x in mm.split("/"))
            row["fallen_back"] = row["errors"] + row["native"]
            ops[m.group(1)] = row
        elif m := LARGEST.match(line):
            ops.setdefault(m.group(1), {}).update(
                max_abs=float(m.group(2)), max_rel=float(m.group(3)),
                first_mismatch_call=int(m.group(4)) if m.group(4) else None)
        elif m := MISMATCH.match(line):
            ops.setdefault(m.group(1), {}).setdefault("mismatches", []).append(m.group(2))
    return ops


def metric_values(regex, text):
    """Every number `regex` finds in `text`, in order: its first group, or the whole match."""
    out = []
    for m in regex.finditer(text):
        s = m.group(1) if regex.groups else m.group(0)
        try:
            out.append(float(s))
        except (TypeError, ValueError):
            pass
    return out


def close(a, b, rtol, atol):
    return a == b or abs(a - b) <= atol + rtol * abs(b)


def compare_series(native, other, rtol, atol):
    """Step by step: the largest relative difference and the first step out of tolerance."""
    worst, first = 0.0, None
    for i, (n, o) in enumerate(zip(native, other)):
        worst = max(worst, abs(o - n) / max(abs(n), 1e-30))
        if first is None and not close(o, n, rtol, atol):
            first = i
    if first is None and len(native) != len(other):
        first = min(len(native), len(other))  # one run printed fewer values: they part where it stopped
    return {"steps": min(len(native), len(other)), "max_rel_diff": worst, "first_divergence": first,
            "matches": first is None and len(native) > 0}


def metrics(regexes, runs, modes, rtol, atol):
    """Per metric: each mode's values (first successful run of it, else its first run), and each other
    mode against native."""
    out = []
    for pattern in regexes:
        rx = re.compile(pattern)
        series = {}
        for mode in modes:
            mine = [r for r in runs if r["mode"] == mode]
            pick = next((r for r in mine if r["ok"]), mine[0])
            series[mode] = {"run": pick["index"], "values": metric_values(rx, pick["stdout"])}
        found = {m: len(s["values"]) for m, s in series.items()}
        entry = {"metric": pattern, "series": series, "compared": {}, "problem": None}
        if not any(found.values()):
            entry["problem"] = f"metric '{pattern}' matched nothing in any run's output"
        elif not found["native"]:
            entry["problem"] = f"metric '{pattern}' matched nothing in the native run's output"
        else:
            for mode in modes[1:]:
                entry["compared"][mode] = compare_series(series["native"]["values"], series[mode]["values"],
                                                         rtol, atol)
        out.append(entry)
    return out


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def trace_device_ns(trace):
    """Total device time of a trace, or None when it has none (CPU runs: the preload times devices only
    on CUDA)."""
    if not trace:
        return None
    times = [entry_device_ns(e) for e in trace.get("ops") or [] if e.get("device_time")]
    return sum(times) if times else None


def entry_device_ns(e):
    """A trace entry's device time for all its calls: where calls were left out on purpose
    (BB_DEVICE_TIME=first, sampled timing), as the trace extrapolates it (docs/trace-format.md)."""
    d = e["device_time"]
    return d.get("estimated_total_ns") or d["total_ns"]


def speedup(native, other):
    """native/other of two spreads: the ratio of medians and the range over every pairing's extremes."""
    if not native or not other or not other["median"] or not other["min"]:
        return None
    return {"median": native["median"] / other["median"], "min": native["min"] / other["max"],
            "max": native["max"] / other["min"]}


def end_to_end(runs, modes):
    out = {}
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        ok = [r for r in mine if r["ok"]]
        out[mode] = {"runs": len(mine), "succeeded": len(ok), "wall_s": spread([r["wall_s"] for r in ok]),
                     "device_ns": spread([trace_device_ns(r["trace"]) for r in ok])}
    for mode in modes[1:]:
        out[mode]["wall_speedup"] = speedup(out["native"]["wall_s"], out[mode]["wall_s"])
        out[mode]["device_speedup"] = speedup(out["native"]["device_ns"], out[mode]["device_ns"])
    return out


def arg_text(a):
    kind = a.get("kind")
    if kind == "tensor":
        shape = a.get("shape")
        return f"{a.get('dtype')}[{','.join(map(str, shape))}]" if shape is not None else f"{a.get('dtype')}[?]"
    if kind == "tensor_list" or kind == "optional_tensor_list":
        return "[" + ", ".join(arg_text(t) if t else "None" for t in a.get("value") or []) + "]"
    if kind == "none":
        return "None"
    return str(a.get("value", kind))


def signature_text(entry):
    return "(" + ", ".join(arg_text(a) for a in entry.get("args") or []) + ")"


def per_signature(trace):
    """{(op, signature): {count, routed, device_ns or None}} of one trace."""
    out = {}
    for e in (trace or {}).get("ops") or []:
        key = (e["op"], signature_text(e))
        s = out.setdefault(key, {"count": 0, "routed": 0, "device_ns": None})
        s["count"] += e.get("count", 0)
        s["routed"] += e.get("routed", 0)
        if e.get("device_time"):
            s["device_ns"] = (s["device_ns"] or 0) + entry_device_ns(e)
    return out


def median_over_runs(tables, key, field):
    vals = [t[key][field] for t in tables if key in t and t[key][field] is not None]
    return statistics.median(vals) if vals else None


def measured_runs(runs, mode):
    """The runs of `mode` that succeeded and left a trace; when none did, those that left one anyway (a
    crashed run's trace, written by the preload's signal handler, still says what it ran)."""
    mine = [r for r in runs if r["mode"] == mode and r["trace"]]
    return [r for r in mine if r["ok"]] or mine


def per_op(runs, modes):
    """Device time native against each other mode, per signature and per op (medians over the runs
    that succeeded), with each op's gain (native - other, ns: positive is time saved) and calls."""
    tables = {m: [per_signature(r["trace"]) for r in measured_runs(runs, m)] for m in modes}
    keys = sorted({k for ts in tables.values() for t in ts for k in t})
    sigs = []
    for key in keys:
        row = {"op": key[0], "signature": key[1]}
        for m in modes:
            row[m] = {"calls": median_over_runs(tables[m], key, "count"),
                      "routed": median_over_runs(tables[m], key, "routed"),
                      "device_ns": median_over_runs(tables[m], key, "device_ns")}
        sigs.append(row)
    return sigs, _fold_ops(sigs, modes)


def _fold_ops(sigs, modes):
    ops = {}
    for s in sigs:
        o = ops.setdefault(s["op"], {"op": s["op"], "signatures": 0,
                                     **{m: {"calls": 0, "routed": 0, "device_ns": None} for m in modes}})
        o["signatures"] += 1
        for m in modes:
            for f in ("calls", "routed", "device_ns"):
                if s[m][f] is not None:
                    o[m][f] = (o[m][f] or 0) + s[m][f]
    for o in ops.values():
        for m in modes[1:]:
            n, r = o["native"]["device_ns"], o[m]["device_ns"]
            o[m]["gain_ns"] = (n or 0) - (r or 0) if (n is not None or r is not None) else None
    order = "routed" if "routed" in modes else modes[-1]
    # Most time moved first, either way; without device time (CPU), the most routed calls first.
    return sorted(ops.values(), key=lambda o: (-abs(o[order].get("gain_ns") or 0), -(o[order]["routed"] or 0),
                                               -(o["native"]["calls"] or 0)))
