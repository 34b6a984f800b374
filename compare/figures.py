"""The plots of bbcompare's and bbreplay's pages, as plotly figures (drawn by plotly.js in the page)."""
import math

import plotly.graph_objects as go

COLORS = {"native": "#4c72b0", "routed": "#dd8452", "shadow": "#55a868"}
TOP = 25


def titled(fig, title, x=None, y=None, height=420):
    fig.update_layout(title=title, height=height, xaxis_title=x, yaxis_title=y, legend_orientation="h",
                      legend_y=-0.2)
    return fig


def wall_times(report):
    fig = go.Figure()
    for m in report["meta"]["modes"]:
        rs = [r for r in report["runs"] if r["mode"] == m]
        fig.add_trace(go.Box(y=[r["wall_s"] for r in rs if r["ok"]], name=m, boxpoints="all",
                             marker_color=COLORS.get(m)))
        failed = [r for r in rs if not r["ok"]]
        if failed:
            fig.add_trace(go.Scatter(x=[m] * len(failed), y=[r["wall_s"] for r in failed], mode="markers",
                                     marker=dict(symbol="x", size=12, color="#b00"), name=f"{m}: failed runs",
                                     text=[r["ended"] for r in failed]))
    return titled(fig, "Wall time of each run", y="seconds", height=360)


def metric_curves(m):
    fig = go.Figure()
    for mode, s in m["series"].items():
        fig.add_trace(go.Scatter(x=list(range(len(s["values"]))), y=s["values"], mode="lines+markers", name=mode,
                                 line=dict(color=COLORS.get(mode), dash="dot" if mode == "shadow" else None)))
    for mode, c in m["compared"].items():
        if c["first_divergence"] is not None:
            fig.add_vline(x=c["first_divergence"], line_dash="dash", line_color="#b00",
                          annotation_text=f"{mode} diverges")
    return titled(fig, f"Metric {m['metric']}", x="step (match number)", y="value")


def _top_ops(report, key):
    ops = [o for o in report["ops"] if key(o)]
    return sorted(ops, key=key, reverse=True)[:TOP]


def device_time_per_op(report):
    modes = [m for m in report["meta"]["modes"] if m != "shadow"]  # shadow runs both kernels: not a timing
    ops = _top_ops(report, lambda o: max((o[m]["device_ns"] or 0) for m in modes))
    fig = go.Figure()
    for m in modes:
        fig.add_trace(go.Bar(y=[o["op"] for o in ops], x=[(o[m]["device_ns"] or 0) / 1e3 for o in ops],
                             name=m, orientation="h", marker_color=COLORS.get(m)))
    fig.update_layout(barmode="group", yaxis_autorange="reversed")
    return titled(fig, f"Device time per op, native against routed (top {TOP})", x="µs (median over runs)",
                  height=max(360, 26 * len(ops) * len(modes) // 2 + 160))


def cumulative_gain(report):
    ops = [o for o in report["ops"] if o.get("routed", {}).get("gain_ns")]
    ops.sort(key=lambda o: -o["routed"]["gain_ns"])
    gains = [o["routed"]["gain_ns"] / 1e3 for o in ops]
    total, cum = 0.0, []
    for g in gains:
        total += g
        cum.append(total)
    names = [o["op"] for o in ops]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=gains, name="gained by the op (native - routed)",
                         marker_color=["#55a868" if g >= 0 else "#c44e52" for g in gains]))
    fig.add_trace(go.Scatter(x=names, y=cum, mode="lines+markers", name="cumulative", line_color="#333"))
    return titled(fig, "Device time gained (+) or lost (-) per op, largest gain first, and the running total",
                  y="µs", height=440)


def routing_per_op(report):
    ops = {op: o for op, o in report["routing"]["ops"].items() if "calls" in o}
    names = list(ops)
    fig = go.Figure()
    for field, color in (("routed", "#55a868"), ("declined", "#8172b3"), ("fallen_back", "#c44e52"),
                         ("unmet", "#bbbbbb")):
        fig.add_trace(go.Bar(x=names, y=[ops[n][field] for n in names], name=field.replace("_", " "),
                             marker_color=color))
    fig.update_layout(barmode="stack")
    return titled(fig, "Calls per routed op in the routed run: routed, declined, fell back, condition unmet",
                  y="calls", height=380)


def shadow_errors(report):
    sh = report["shadow"]
    names = list(sh)
    fig = go.Figure()
    for field, label, color in (("max_abs", "largest abs error", "#4c72b0"), ("max_rel", "largest rel error",
                                                                             "#dd8452")):
        fig.add_trace(go.Bar(x=names, y=[max(sh[n].get(field) or 0, 1e-18) for n in names], name=label,
                             marker_color=color,
                             text=[f"{sh[n].get('mismatched', 0)}/{sh[n].get('compared', 0)} mismatched"
                                   for n in names]))
    fig.update_layout(barmode="group", yaxis_type="log")
    return titled(fig, "Shadow mode: largest error per op over every compared call (log scale; 1e-18 is zero)",
                  y="error", height=400)


def replay_statuses(report):
    names = [p["op"] for p in report["ops"]]
    fig = go.Figure()
    for field, color in (("passed", "#55a868"), ("failed", "#c44e52"), ("crashed", "#8c1c13"),
                         ("timeout", "#e17c05"), ("skipped", "#bbbbbb"), ("invalid", "#937860")):
        fig.add_trace(go.Bar(x=names, y=[p.get(field, 0) for p in report["ops"]], name=field, marker_color=color))
    # A flag marks cases that also have a status: drawn beside the bars, not stacked on them.
    fig.add_trace(go.Scatter(x=names, y=[p.get("flagged", 0) for p in report["ops"]], name="flagged (of those)",
                             mode="markers", marker=dict(symbol="diamond", size=14, color="#8172b3")))
    fig.update_layout(barmode="stack")
    return titled(fig, "Cases per op by status (flagged: caught by an integrity check)", y="cases")


def replay_speedups(report):
    ops = [p for p in report["ops"] if p.get("speedup_geomean")]
    # Bars grow from 1x (base) up to a speedup or down to a slowdown.
    fig = go.Figure(go.Bar(x=[p["op"] for p in ops], y=[p["speedup_geomean"] - 1 for p in ops], base=1,
                           text=[f"{p['speedup_geomean']:.3g}x" for p in ops], hoverinfo="x+text",
                           marker_color=["#55a868" if p["speedup_geomean"] >= 1 else "#c44e52" for p in ops]))
    fig.add_hline(y=1, line_dash="dash", line_color="#333")
    fig.update_layout(yaxis_type="log")
    return titled(fig, "Speedup per op (geometric mean over its cases, native / generated; log scale)",
                  y="speedup")


def replay_case_hist(report):
    speeds = [c["speedup"] for c in report.get("cases", []) if c.get("speedup")]
    fig = go.Figure(go.Histogram(x=[math.log2(s) for s in speeds], marker_color="#4c72b0", nbinsx=40))
    fig.add_vline(x=0, line_dash="dash", line_color="#333")
    return titled(fig, f"Distribution of per-case speedups ({len(speeds)} cases with a speedup)",
                  x="log2(speedup): 0 is as fast as native, 1 twice as fast, -1 half as fast", y="cases")
