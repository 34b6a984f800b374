"""bbcompare: runs a program natively and with a backend routed (and in shadow mode), each under the
preload, and shows where time and accuracy went (docs/compare.md).

    bbcompare --backend backends/cpu_reference --metric 'loss ([0-9.eE+-]+)' --html cmp.html \\
        -- python3 examples/train_small.py --steps 5
    bbcompare --replay report.json --html replay.html      # a bbreplay JSON report as a page

Exit status: 0 when every run succeeded, calls were routed, every metric matched native within
tolerance and no shadow comparison mismatched; 1 otherwise; 2 for bad usage.
"""
import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import analysis  # noqa: E402
import runs as runner  # noqa: E402
import text_report  # noqa: E402

SCHEMA = "bbcompare-report"
SCHEMA_VERSION = 1


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bbcompare", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--backend", help="backend folder to route to (BB_BACKEND)")
    p.add_argument("--policy", help="routing policy (BB_POLICY); with --shadow, its ops run in shadow mode")
    p.add_argument("--shadow", action="store_true", help="also run in shadow mode: native results go on, the "
                   "backend's kernels run beside them and are compared per op")
    p.add_argument("--metric", action="append", default=[], metavar="REGEX",
                   help="values in the program's stdout to compare step by step: the first group of each "
                   "match (or the whole match); repeatable")
    p.add_argument("--rtol", type=float, default=1e-3, help="metric tolerance, relative (default 1e-3)")
    p.add_argument("--atol", type=float, default=1e-6, help="metric tolerance, absolute (default 1e-6)")
    p.add_argument("--runs", type=int, default=1, help="runs of each mode, interleaved (default 1)")
    p.add_argument("--timeout", type=float, default=None, help="seconds one run may take (default: no limit)")
    p.add_argument("--no-device-time", dest="device_time", action="store_false", default=None,
                   help="BB_DEVICE_TIME=0 in every run")
    p.add_argument("--json", metavar="F", help="write the report as JSON")
    p.add_argument("--html", metavar="F", help="write the report as one self-contained HTML page with plots")
    p.add_argument("--keep", metavar="DIR", help="keep every run's trace, summary and output in DIR")
    p.add_argument("--replay", metavar="REPORT", help="turn a bbreplay JSON report into --html's page (runs nothing)")
    p.add_argument("--preload", default=str(default_preload()), help="the preload (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = p.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    check_args(p, args)
    return args


def default_preload():
    return Path(os.environ.get("BB_COMPARE_PRELOAD") or HERE.parent / "lib" / "libbbshim.so")


def check_args(p, args):
    if args.replay:
        if args.command or not args.html:
            p.error("--replay REPORT takes no command and needs --html F")
        return
    if not args.command:
        p.error("no command: bbcompare [options] -- COMMAND ARGS...")
    if not args.backend and not args.policy:
        p.error("--backend or --policy is needed: there is nothing to route otherwise")
    if args.backend and not Path(args.backend).is_dir():
        p.error(f"--backend {args.backend}: not a folder")
    if args.policy and not Path(args.policy).is_file():
        p.error(f"--policy {args.policy}: not a file")
    if args.shadow and not args.backend and not runner.policy_backend(args.policy):
        p.error("--shadow needs --backend or a policy with a backend: key")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if not Path(args.preload).is_file():
        p.error(f"preload {args.preload} not found (build it, or pass --preload)")
    for rx in args.metric:
        try:
            re.compile(rx)
        except re.error as e:
            p.error(f"--metric '{rx}': {e}")


def problems_of(report):
    """Why the comparison is not clean, one line each (empty: exit 0)."""
    out = [f"{r['mode']} run {r['index'] + 1}: {r['ended']}" for r in report["runs"] if not r["ok"]]
    if not report["routing"]["routed_calls"]:
        out.append("no call was routed: " + report["routing"]["why_none"])
    for m in report["metrics"]:
        if m["problem"]:
            out.append(m["problem"])
        for mode, c in m["compared"].items():
            if not c["matches"]:
                where = "" if c["first_divergence"] is None else f" from step {c['first_divergence']}"
                out.append(f"metric '{m['metric']}': {mode} diverges from native{where} "
                           f"(largest relative difference {c['max_rel_diff']:.3g})")
    bad = [o for o, s in report["shadow"].items() if s.get("mismatched")]
    if bad:
        out.append("shadow mismatches in " + ", ".join(bad))
    return out


def routing_of(runs, modes):
    """The routed run's summary (first successful run, else first): per op and the total routed."""
    mine = [r for r in runs if r["mode"] == "routed"]
    pick = next((r for r in mine if r["ok"] and r["summary"]), next((r for r in mine if r["summary"]), mine[0]))
    ops = analysis.parse_summary(pick["summary"])
    routed = sum(o.get("routed", 0) for o in ops.values())
    why = ""
    if not routed:
        said = [line for line in pick["stderr"].splitlines() if line.startswith("[bbshim]")][-5:]
        why = ("the routed run wrote no routing summary" if not pick["summary"] else
               "the summary lists the backend's ops but none of their calls was routed")
        why += f" (routed run {pick['index'] + 1}, {pick['ended']}" + (
            "; the preload said: " + " | ".join(said) if said else "; the preload said nothing") + ")"
    return {"run": pick["index"], "ops": ops, "routed_calls": routed, "why_none": why,
            "summary_text": pick["summary"]}


def shadow_of(runs, modes):
    if "shadow" not in modes:
        return {}
    mine = [r for r in runs if r["mode"] == "shadow"]
    pick = next((r for r in mine if r["summary"]), mine[0])
    return {op: row for op, row in analysis.parse_summary(pick["summary"]).items() if row.get("mode") == "shadow"}


def build_report(args, modes, runs):
    sigs, ops = analysis.per_op(runs, modes)
    report = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "meta": {"command": args.command, "backend": args.backend, "policy": args.policy, "runs": args.runs,
                 "modes": modes, "metric": args.metric, "rtol": args.rtol, "atol": args.atol,
                 "device_time": any(analysis.trace_device_ns(r["trace"]) is not None for r in runs)},
        "runs": [{k: v for k, v in r.items() if k not in ("trace", "summary", "stdout", "stderr")} for r in runs],
        "end_to_end": analysis.end_to_end(runs, modes),
        "metrics": analysis.metrics(args.metric, runs, modes, args.rtol, args.atol),
        "routing": routing_of(runs, modes),
        "shadow": shadow_of(runs, modes),
        "ops": ops, "signatures": sigs,
    }
    report["problems"] = problems_of(report)
    return report


def write_outputs(args, report):
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.html:
        import page  # plotly is needed only for pages
        Path(args.html).write_text(page.compare_page(report))


def keep_outputs(runs, workdir):
    for r in runs:
        stem = workdir / f"{r['mode']}-{r['index']}"
        Path(f"{stem}.stdout.txt").write_text(r["stdout"])
        Path(f"{stem}.stderr.txt").write_text(r["stderr"])


def compare(args):
    say = (lambda s: None) if args.quiet else (lambda s: print(f"bbcompare: {s}", file=sys.stderr, flush=True))
    with tempfile.TemporaryDirectory(prefix="bbcompare-") as tmp:
        workdir = Path(args.keep).resolve() if args.keep else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        modes, runs = runner.run_all(args, workdir, Path(args.preload).resolve(), say)
        if args.keep:
            keep_outputs(runs, workdir)
        report = build_report(args, modes, runs)
    print(text_report.render(report))
    write_outputs(args, report)
    return 1 if report["problems"] else 0


def replay_page(args):
    import page
    try:
        report = json.loads(Path(args.replay).read_text())
    except (OSError, ValueError) as e:
        print(f"bbcompare: {args.replay}: {e}", file=sys.stderr)
        return 2
    if report.get("schema") != "bbreplay-report":
        print(f"bbcompare: {args.replay}: not a bbreplay JSON report (schema {report.get('schema')!r})",
              file=sys.stderr)
        return 2
    Path(args.html).write_text(page.replay_page(report, Path(args.replay).name))
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return replay_page(args) if args.replay else compare(args)


if __name__ == "__main__":
    sys.exit(main())
