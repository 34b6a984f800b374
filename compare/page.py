"""One self-contained HTML page per report: plotly's own bundled plotly.js inlined (no network needed to
open it), one figure per question, the facts beside them as tables. compare_page() takes bbcompare's
report, replay_page() a bbreplay JSON report."""
import html

import plotly
import plotly.io as pio
from plotly.offline import get_plotlyjs

import figures

HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<script>window.bbErrors = []; window.addEventListener('error', function (e) {{ window.bbErrors.push(String(e.message)); }});</script>
<script>{plotlyjs}</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }}
h1 {{ font-size: 1.5em; }} h2 {{ font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }}
table {{ border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }}
td, th {{ border: 1px solid #ddd; padding: 2px 8px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.problem {{ color: #b00; }} .ok {{ color: #070; }} .note {{ color: #666; font-size: 0.9em; }}
pre {{ background: #f6f6f6; padding: 0.5em; overflow-x: auto; font-size: 0.85em; }}
</style></head><body>
"""

TAIL = """<script>
document.body.dataset.plots = document.querySelectorAll('.js-plotly-plot .main-svg').length > 0 ?
  String(document.querySelectorAll('.js-plotly-plot').length) : '0';
document.body.dataset.scriptErrors = String(window.bbErrors.length);
</script>
<p class="note">Made by bbcompare with plotly {version}.</p>
</body></html>
"""


def esc(x):
    return html.escape(str(x))


def table(header, rows):
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
    return "".join(out) + "</table>"


def figure_html(fig, name):
    fig.update_layout(template="plotly_white", margin=dict(l=60, r=20, t=50, b=50))
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"fig-{name}",
                       config={"displaylogo": False, "responsive": True})


def page(title, body):
    return HEAD.format(title=esc(title), plotlyjs=get_plotlyjs()) + body + TAIL.format(version=plotly.__version__)


def problems_html(problems):
    if not problems:
        return '<p class="ok">Verdict: OK: every run succeeded, calls were routed, metrics match.</p>'
    return '<p class="problem">Verdict: problems:</p><ul>' + "".join(
        f'<li class="problem">{esc(p)}</li>' for p in problems) + "</ul>"


def fmt(x, unit=""):
    if x is None:
        return "-"
    return f"{x:.4g}{unit}"


def end_to_end_rows(report):
    rows = []
    for m in report["meta"]["modes"]:
        d = report["end_to_end"][m]
        w, dv = d["wall_s"], d["device_ns"]
        sp = d.get("wall_speedup")
        dsp = d.get("device_speedup")
        rows.append([m, f"{d['succeeded']}/{d['runs']}",
                     "-" if not w else f"{w['median']:.3f} [{w['min']:.3f}, {w['max']:.3f}]",
                     "-" if not dv else f"{dv['median'] / 1e6:.3f}",
                     "-" if not sp else f"{sp['median']:.3f}x [{sp['min']:.3f}, {sp['max']:.3f}]",
                     "-" if not dsp else f"{dsp['median']:.3f}x"])
    return rows


def failed_runs_html(report):
    out = []
    for r in report["runs"]:
        if not r["ok"]:
            out.append(f'<p class="problem">{esc(r["mode"])} run {r["index"] + 1}: {esc(r["ended"])} after '
                       f'{r["wall_s"]:.2f} s. Its stderr ends:</p><pre>{esc(r["stderr_tail"] or "(empty)")}</pre>')
    return "".join(out)


def compare_page(report):
    meta = report["meta"]
    body = [f"<h1>bbcompare: {esc(' '.join(meta['command']))}</h1>",
            f"<p>backend {esc(meta['backend'] or '-')}, policy {esc(meta['policy'] or '-')}, modes {esc(', '.join(meta['modes']))},"
            f" {meta['runs']} run(s) each.</p>", problems_html(report["problems"]), failed_runs_html(report),
            "<h2>End to end</h2>",
            table(["mode", "runs ok", "wall s: median [min, max]", "device ms", "speedup (wall)",
                   "speedup (device)"], end_to_end_rows(report)),
            figure_html(figures.wall_times(report), "wall")]
    body += ["<h2>Metrics, step by step</h2>", metrics_html(report),
             "<h2>Per op</h2>", figure_html(figures.routing_per_op(report), "routing")]
    if meta["device_time"]:
        body += [figure_html(figures.device_time_per_op(report), "optime"),
                 figure_html(figures.cumulative_gain(report), "gain")]
    else:
        body.append('<p class="note">The traces hold no device time (the preload measures it on CUDA only): no '
                    'per-op time plots for this run; the wall times above are the host\'s.</p>')
    body.append(ops_table(report))
    if report["shadow"]:
        body += ["<h2>Shadow mode</h2>", figure_html(figures.shadow_errors(report), "shadow"), shadow_table(report)]
    body.append("<h2>Routing summary (routed run)</h2><pre>" + esc(report["routing"]["summary_text"] or "(none)")
                + "</pre>")
    return page("bbcompare", "\n".join(body))


def metrics_html(report):
    if not report["metrics"]:
        return '<p class="note">No --metric given.</p>'
    out = []
    for i, m in enumerate(report["metrics"]):
        out.append(f"<p>metric <code>{esc(m['metric'])}</code>: " + (
            f'<span class="problem">{esc(m["problem"])}</span>' if m["problem"] else "") + "".join(
            f" {esc(mode)}: " + ('<span class="ok">matches native</span>' if c["matches"] else
                                 f'<span class="problem">diverges from step {c["first_divergence"]}</span>')
            + f" (largest relative difference {c['max_rel_diff']:.3g});" for mode, c in m["compared"].items())
            + "</p>")
        out.append(figure_html(figures.metric_curves(m), f"metric{i}"))
    return "".join(out)


def ops_table(report, limit=40):
    modes = report["meta"]["modes"]
    other = "routed"
    rows = []
    for o in report["ops"][:limit]:
        r = report["routing"]["ops"].get(o["op"], {})
        rows.append([o["op"], o["signatures"], fmt(o["native"]["calls"]), r.get("routed", "-"),
                     r.get("declined", "-"), r.get("fallen_back", "-"), fmt_us(o["native"]["device_ns"]),
                     fmt_us(o[other]["device_ns"]) if other in modes else "-",
                     fmt_us(o[other].get("gain_ns")) if other in modes else "-"])
    return table(["op", "signatures", "calls", "routed", "declined", "fell back", "native µs", "routed µs",
                  "gained µs"], rows)


def fmt_us(ns):
    return "-" if ns is None else f"{ns / 1e3:.1f}"


def shadow_table(report):
    rows = [[op, f"{s.get('mismatched', 0)}/{s.get('compared', 0)}", fmt(s.get("max_abs")), fmt(s.get("max_rel")),
             f"compared call {s['first_mismatch_call']}" if s.get("first_mismatch_call") else "none",
             (s.get("mismatches") or [""])[0]] for op, s in report["shadow"].items()]
    return table(["op", "mismatched/compared", "largest abs error", "largest rel error", "first out of tolerance",
                  "first mismatch"], rows)


def replay_page(report, name):
    o = report["overall"]
    meta = report.get("meta", {})
    body = [f"<h1>bbreplay: {esc(name)}</h1>",
            f"<p>trace {esc(meta.get('trace'))}, backend {esc(meta.get('backend'))}, device {esc(meta.get('device'))}"
            f", {esc(meta.get('timing'))}.</p>",
            table(["cases", "passed", "failed", "crashed", "skipped", "flagged", "invalid", "speedup (geomean)"],
                  [[o.get(k, "-") for k in ("cases", "passed", "failed", "crashed", "skipped", "flagged", "invalid")]
                   + [fmt(o.get("speedup_geomean"), "x")]]),
            "<h2>Pass, fail and flags per op</h2>", figure_html(figures.replay_statuses(report), "statuses"),
            "<h2>Speedup per op</h2>", figure_html(figures.replay_speedups(report), "speedup"),
            "<h2>Per-case speedups</h2>", figure_html(figures.replay_case_hist(report), "cases"),
            table(["op", "cases", "passed", "failed", "crashed", "flagged", "speedup", "withheld because"],
                  [[p["op"], p["cases"], p["passed"], p["failed"], p["crashed"], p["flagged"],
                    fmt(p.get("speedup_geomean"), "x"), p.get("speedup_withheld") or ""] for p in report["ops"]])]
    return page("bbreplay report", "\n".join(body))

