"""bbcompare's console report: the same facts as the JSON, for a terminal."""

TOP_OPS = 15


def fmt_s(sp):
    if not sp:
        return "-"
    return f"{sp['median']:.3f} s" + (f" [{sp['min']:.3f}, {sp['max']:.3f}]" if sp["n"] > 1 else "")


def fmt_ns(ns):
    if ns is None:
        return "-"
    return f"{ns / 1e3:.1f} us" if abs(ns) < 1e6 else f"{ns / 1e6:.2f} ms"


def fmt_ratio(r):
    return "-" if not r else f"{r['median']:.3f}x [{r['min']:.3f}, {r['max']:.3f}]"


def end_to_end(report):
    modes = report["meta"]["modes"]
    e2e = report["end_to_end"]
    lines = ["end to end (median [min, max] over the runs that succeeded):",
             f"  {'mode':<8} {'runs ok':>8} {'wall time':>28} {'device time':>16} {'speedup (wall)':>26}"
             f" {'speedup (device)':>26}"]
    for m in modes:
        d = e2e[m]
        dev = fmt_ns(d["device_ns"]["median"]) if d["device_ns"] else "-"
        lines.append(f"  {m:<8} {d['succeeded']:>4}/{d['runs']:<3} {fmt_s(d['wall_s']):>28} {dev:>16} "
                     f"{fmt_ratio(d.get('wall_speedup')):>26} {fmt_ratio(d.get('device_speedup')):>26}")
    if not report["meta"]["device_time"]:
        lines.append("  (no device time in the traces: the preload measures it on CUDA only; wall times are the "
                     "host's)")
    return lines


def failed_runs(report):
    lines = []
    for r in report["runs"]:
        if r["ok"]:
            continue
        lines.append(f"{r['mode']} run {r['index'] + 1} failed: {r['ended']} after {r['wall_s']:.2f} s; "
                     "stderr's tail:")
        lines += ["  | " + line for line in (r["stderr_tail"] or "(empty)").splitlines()]
    return lines


def metrics(report):
    lines = []
    for m in report["metrics"]:
        lines.append(f"metric '{m['metric']}': " + ", ".join(
            f"{mode} {len(s['values'])} values" for mode, s in m["series"].items()))
        if m["problem"]:
            lines.append(f"  {m['problem']}")
        for mode, c in m["compared"].items():
            verdict = "matches native" if c["matches"] else (
                f"DIVERGES from step {c['first_divergence']}" if c["first_divergence"] is not None else "no values")
            lines.append(f"  {mode}: {verdict} over {c['steps']} steps; largest relative difference "
                         f"{c['max_rel_diff']:.3g}")
        lines += step_table(m)
    return lines


def step_table(m, limit=10):
    series = m["series"]
    n = max((len(s["values"]) for s in series.values()), default=0)
    if not n:
        return []
    lines = ["  " + f"{'step':>5} " + " ".join(f"{mode:>14}" for mode in series)]
    for i in list(range(min(n, limit))) + ([n - 1] if n > limit else []):
        cells = [f"{s['values'][i]:>14.7g}" if i < len(s["values"]) else f"{'-':>14}" for s in series.values()]
        lines.append("  " + f"{i:>5} " + " ".join(cells))
    return lines


def routing(report):
    r = report["routing"]
    lines = [f"routing: {r['routed_calls']} calls routed" + (f" ({r['why_none']})" if not r["routed_calls"] else "")]
    if r["ops"]:
        lines.append(f"  {'op':<36} {'calls':>8} {'routed':>8} {'declined':>8} {'fell back':>9} {'unmet':>7}")
        for op, o in r["ops"].items():
            if "calls" in o:
                lines.append(f"  {op:<36} {o['calls']:>8} {o['routed']:>8} {o['declined']:>8} {o['fallen_back']:>9}"
                             f" {o['unmet']:>7}")
    return lines


def shadow(report):
    if not report["shadow"]:
        return []
    lines = ["shadow mode, per op:",
             f"  {'op':<36} {'mismatched':>12} {'largest abs':>12} {'largest rel':>12}  first out of tolerance"]
    for op, s in report["shadow"].items():
        first = s.get("first_mismatch_call")
        lines.append(f"  {op:<36} {s.get('mismatched', 0):>5}/{s.get('compared', 0):<6} "
                     f"{s.get('max_abs', float('nan')):>12.3g} {s.get('max_rel', float('nan')):>12.3g}  "
                     + (f"compared call {first}" if first else "none"))
    return lines


def per_op(report):
    modes = report["meta"]["modes"]
    other = "routed"
    lines = [f"per op, device time native against {other} (most end-to-end difference first):",
             f"  {'op':<36} {'calls':>7} {'routed':>7} {'native':>12} {other:>12} {'gained':>12}"]
    for o in report["ops"][:TOP_OPS]:
        lines.append(f"  {o['op']:<36} {o['native']['calls']:>7g} {o[other]['routed']:>7g} "
                     f"{fmt_ns(o['native']['device_ns']):>12} {fmt_ns(o[other]['device_ns']):>12} "
                     f"{fmt_ns(o[other].get('gain_ns')):>12}")
    if len(report["ops"]) > TOP_OPS:
        lines.append(f"  ... {len(report['ops']) - TOP_OPS} more ops in --json")
    return lines if other in modes and report["ops"] else []


def render(report):
    parts = [end_to_end(report), failed_runs(report), metrics(report), routing(report), shadow(report),
             per_op(report)]
    verdict = ["verdict: " + ("OK" if not report["problems"] else "PROBLEMS")]
    verdict += ["  " + p for p in report["problems"]]
    return "\n\n".join("\n".join(p) for p in parts + [verdict] if p)
