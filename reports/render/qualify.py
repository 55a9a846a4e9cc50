"""The qualification report for a terminal, Markdown and one self-contained HTML file.

All three lead with the verdict and the bad node set, then the stragglers and slow links
(each figure next to its peers' median, floor and expected value), then every figure by
test. Everything that came from a node or a file is escaped (HTML, Markdown) and stripped
of control characters (terminal, Markdown): a log is hostile input.
"""

from __future__ import annotations

import html
import re
import statistics
from collections import defaultdict

from ...checks.core.finding import Status
from ...checks.qualify.judge import TEST_NAMES, Judged
from ..model.cluster import fold
from ..model.qualify import QualifyReport
from . import qualify_svg as svg
from .md import md_code

_CONTROL = re.compile(r"[\x00-\x1f\x7f\x9b]")
_MARKUP = re.compile(r"([\\`*_\[\]<>!&|~])")


def _t(value: object) -> str:
    return _CONTROL.sub("?", str(value))


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}" if abs(value) < 100 else f"{value:.1f}"


def headline(report: QualifyReport) -> str:
    nodes = len(report.cluster.nodes)
    bad = report.bad_nodes
    word = "READY" if report.ready else "NOT READY"
    tail = f"{len(bad)} of {nodes} node(s) not ready: {fold(bad)}" if bad else \
        f"all {nodes} node(s) qualified"
    if report.verdict is Status.WARN and report.ready:
        tail += " (with warnings)"
    return f"QUALIFY {word} ({report.verdict.value.upper()}): {tail}"


def _straggler_line(j: Judged) -> str:
    f = j.figure
    deficit = j.deficit_pct
    exp = j.expectation
    parts = [f"{j.status.value.upper():4} {f.node} {f.component}", f"qualify.{f.test}",
             f"{_n(f.value)} {f.unit}", f"peers' median {_n(j.median)}"]
    if deficit is not None:
        parts.append(f"{-deficit:+.1f} %")
    if exp is not None:
        parts.append(f"floor {_n(exp.floor)}, expected {_n(exp.expected)}")
    parts.append(j.why)
    return "  " + " | ".join(_t(p) for p in parts)


def _by_test(report: QualifyReport) -> dict[str, list[Judged]]:
    groups: dict[str, list[Judged]] = defaultdict(list)
    for j in report.figures:
        groups[j.figure.test].append(j)
    return dict(sorted(groups.items()))


def _summary_rows(report: QualifyReport) -> list[list[str]]:
    rows = []
    for test, items in _by_test(report).items():
        values = [j.figure.value for j in items]
        exp = items[0].expectation
        rows.append([test, str(len(items)), _n(min(values)), _n(statistics.median(values)),
                     _n(max(values)), items[0].figure.unit,
                     _n(exp.expected if exp else None), _n(exp.floor if exp else None),
                     str(sum(1 for j in items if j.status is not Status.PASS))])
    return rows


_SUMMARY_HEAD = ["test", "figures", "min", "median", "max", "unit", "expected", "floor",
                 "flagged"]


def render_terminal(report: QualifyReport, width: int = 160) -> str:
    out = [headline(report), f"tests: {', '.join(report.tests)} | level {report.level} | "
           f"{report.duration_s:.1f} s | {len(report.repeated)} repeat(s) | "
           f"mode {report.mode}", ""]
    stragglers = report.stragglers()
    out.append("Stragglers and slow links:" if stragglers else
               "Stragglers and slow links: none")
    out += [_straggler_line(j)[:width] for j in stragglers]
    groups = [g for g in report.cluster.groups() if g.status is not Status.PASS]
    if groups:
        out += ["", "Problems:"]
        for g in groups:
            parts = ",".join(sorted(g.components))
            out.append(_t(f"  {g.status.value.upper():5} {g.check} {g.message} [{parts}] "
                          f"on {fold(g.nodes)} -> {g.action.value}")[:width])
    rows = _summary_rows(report)
    if rows:
        widths = [max(len(r[i]) for r in [_SUMMARY_HEAD, *rows]) for i in range(len(rows[0]))]
        out += ["", "Figures by test:"]
        for row in [_SUMMARY_HEAD, *rows]:
            out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    if report.mode == "logs":
        out += ["", "Per file:"]
        for item in report.run_rows():
            figure = item["figure"]
            shown = f"{figure['value']} {figure['unit']} ({figure['detail']})" if figure else "-"
            out.append(_t(f"  {item['verdict'].upper():5} {item['node']}: {item['tool']} "
                          f"{item['test']} {shown}")[:width])
    out += _cross_lines(report, width)
    if report.drift:
        out += ["", "Drift from the baseline (slowest first):"]
        out += [_t(f"  {d['node']} {d['component']} {d['test']} {d['value']} vs "
                   f"{d['baseline']} {d['unit']} ({d['change_pct']:+.1f} %)")
                for d in report.drift[:20]]
    if report.drained:
        out += ["", "Drain:"]
        out += [_t(f"  {d['node']}: {'drained' if d['drained'] else 'not drained'} "
                   f"{d['reason']} {d.get('why') or ''}").rstrip() for d in report.drained]
    out += [_t(f"note: {n}") for n in report.notes]
    if report.bad_nodes:
        out += ["", f"exclude: {fold(report.bad_nodes)}"]
    return "\n".join(out) + "\n"


def schedule_line(report: QualifyReport) -> str:
    """How many rounds the tests between nodes took, by test, and how long."""
    plan = report.schedule
    if not plan:
        return "Between nodes: not run (--tests pairs,rails,scaling,rack)"
    parts = ", ".join(f"{test} {count}" for test, count in plan["rounds_by_test"].items())
    return (f"Between nodes: {plan['rounds']} round(s) ({parts}) in {plan['seconds']:.1f} s; "
            "pairs, rails and racks: one pairing and its second pass, whatever N; scaling: "
            "two per size, 2·log2 N")


def scaling_verdict(report: QualifyReport) -> str | None:
    """The scaling test's own line: where the Ring breaks, or how far it scales."""
    return next((f"{c.finding.status.value.upper()} {c.finding.message}"
                 for c in report.cluster.findings if c.finding.check == "qualify.scaling"),
                None)


def _cross_lines(report: QualifyReport, width: int) -> list[str]:
    out = ["", schedule_line(report)]
    slow = [g for g in report.cross if g.status is not Status.PASS]
    for g in slow[:40]:
        out.append(_t(f"  {g.status.value.upper():4} {g.run.test} {'-'.join(g.run.nodes)} "
                      f"{g.component} round {g.run.round} ({g.run.stage}): "
                      f"{_n(g.value)} {g.unit} vs {g.basis} {_n(g.reference)} {g.why}")[:width])
    if report.scaling:
        out += ["", "Scaling (all-reduce busbw, GB/s):",
                "  nodes  ring     default  ring efficiency vs 2 nodes"]
        out += [f"  {p.nodes:<6} {_n(p.ring):<8} {_n(p.default):<8} "
                f"{'-' if p.efficiency is None else f'{100 * p.efficiency:.1f} %'} "
                f"{p.status.value}" for p in report.scaling]
        out.append(_t(f"  {scaling_verdict(report) or ''}")[:width])
    return out


def _md(value: object) -> str:
    """Text as Markdown that renders to that text: every character that could open HTML,
    an entity, a link, an image, emphasis or a code span (or end a table cell) is
    backslash-escaped (CommonMark escapes any ASCII punctuation), so a node or tool that
    names itself ``<img onerror=...>`` is shown, not run; the rest stays readable."""
    return _MARKUP.sub(r"\\\1", _t(value))


def render_md(report: QualifyReport) -> str:
    out = [f"# {_md(headline(report))}", "",
           f"Tests: {_md(', '.join(report.tests))}, level {report.level}, "
           f"{report.duration_s:.1f} s, {len(report.repeated)} repeat(s).", ""]
    out += ["## Stragglers and slow links", ""]
    stragglers = report.stragglers()
    if stragglers:
        out += ["| status | node | component | test | value | peers' median | below | floor "
                "| expected |", "|---|---|---|---|---|---|---|---|---|"]
        for j in stragglers:
            exp = j.expectation
            d = j.deficit_pct
            out.append("| " + " | ".join(_md(c) for c in [
                j.status.value, j.figure.node, j.figure.component, j.figure.test,
                f"{_n(j.figure.value)} {j.figure.unit}", _n(j.median),
                "-" if d is None else f"{d:.1f} %", _n(exp.floor if exp else None),
                _n(exp.expected if exp else None)]) + " |")
    else:
        out.append("None.")
    if report.schedule:
        out += ["", "## Between nodes", "", _md(schedule_line(report)), ""]
        out += [f"- {_md(g.status.value.upper())} {_md(g.run.test)} "
                f"{_md(' - '.join(g.run.nodes))} {md_code(g.component)} ({g.run.stage} pass, "
                f"round {g.run.round}): {_n(g.value)} {_md(g.unit)} vs {_md(g.basis)} "
                f"{_n(g.reference)}" for g in report.cross if g.status is not Status.PASS]
        if report.scaling:
            out += ["", "| nodes | Ring busbw | default busbw | Ring efficiency | status |",
                    "|---|---|---|---|---|"]
            out += [f"| {p.nodes} | {_n(p.ring)} | {_n(p.default)} | "
                    f"{'-' if p.efficiency is None else f'{100 * p.efficiency:.1f} %'} | "
                    f"{p.status.value} |" for p in report.scaling]
            out += ["", _md(scaling_verdict(report) or "")]
    out += ["", "## Figures by test", "", "| " + " | ".join(_SUMMARY_HEAD) + " |",
            "|" + "---|" * len(_SUMMARY_HEAD)]
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in _summary_rows(report)]
    if report.bad_nodes:
        out += ["", f"Exclude: {md_code(fold(report.bad_nodes))}"]
    return "\n".join(out) + "\n"


_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2327;background:#f6f7f7}
main{padding:0 24px 24px}header{padding:18px 24px;color:#fff}
header.ok{background:#1e7e34}header.bad{background:#c62828}header h1{margin:0;font-size:26px}
h2{font-size:18px;margin:22px 0 8px}table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #dcdcde;padding:3px 8px;text-align:left;vertical-align:middle}
th{background:#f0f0f1}.fail{color:#b71c1c}.warn{color:#8a6d00}.pass{color:#1e7e34}
.bar{background:#e9ecef;width:220px;height:12px;position:relative}
.bar>span{position:absolute;left:0;top:0;bottom:0}.bar>i{position:absolute;top:-2px;
bottom:-2px;width:2px;background:#1d2327}
.b-pass{background:#2e7d32}.b-warn{background:#f9a825}.b-fail{background:#c62828}
code{font:13px ui-monospace,Menlo,Consolas,monospace}.muted{color:#646970}"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _bar(j: Judged) -> str:
    """The figure against its peers' median (the tick at 80 % of the bar's width)."""
    if not j.median:
        return "<span class=muted>no peers</span>"
    share = max(0.0, min(1.25, j.figure.value / j.median))
    return (f"<div class=bar title='{_e(f'{share * 100:.1f} % of the median')}'>"
            f"<span class='b-{j.status.value}' style='width:{share * 80:.1f}%'></span>"
            f"<i style='left:80%'></i></div>")


def _cross_html(report: QualifyReport) -> list[str]:
    """The tests between nodes: the schedule, the pair heatmaps, the scaling curve and
    every figure that was not a pass, with the pass and round it came from."""
    if not report.schedule:
        return []
    parts = ["<h2>Between nodes</h2>", f"<p>{_e(schedule_line(report))}</p>"]
    for test, title in (("pairs", "Pairs: two-node all-reduce (NCCL_ALGO=Ring)"),
                        ("rails", "Rails: ib_write_bw rail to rail (worst rail per pair)"),
                        ("rack", "Rack: tray pairs over multi-node NVLink")):
        picture = svg.pair_heatmap(report.cross, test)
        if picture:
            parts.append(f"<h2>{_e(title)}</h2><p class=muted>one cell per pair that ran, "
                         "either pass; green pass, amber warn, red fail</p>" + picture)
    curve = svg.scaling_curve(report.scaling, report.fail_pct)
    if curve:
        parts.append("<h2>Scaling: all-reduce bus bandwidth by node count</h2>"
                     f"<p>{_e(scaling_verdict(report) or '')}</p>" + curve)
        parts.append("<table><tr><th>nodes</th><th>Ring busbw</th><th>default busbw</th>"
                     "<th>Ring efficiency vs 2 nodes</th><th>status</th></tr>")
        for p in report.scaling:
            eff = "-" if p.efficiency is None else f"{100 * p.efficiency:.1f} %"
            parts.append(f"<tr><td>{p.nodes}</td><td>{_n(p.ring)}</td><td>{_n(p.default)}</td>"
                         f"<td>{eff}</td><td class={p.status.value}>{p.status.value}</td></tr>")
        parts.append("</table>")
    slow = [g for g in report.cross if g.status is not Status.PASS]
    if slow:
        parts.append("<h2>Slow or failed runs between nodes</h2><table><tr><th>status</th>"
                     "<th>test</th><th>nodes</th><th>component</th><th>pass</th><th>round</th>"
                     "<th>value</th><th>reference</th><th>why</th></tr>")
        for g in slow:
            parts.append(f"<tr><td class={g.status.value}>{g.status.value.upper()}</td>"
                         f"<td>{_e(g.run.test)}</td><td>{_e(' – '.join(g.run.nodes))}</td>"
                         f"<td><code>{_e(g.component)}</code></td><td>{_e(g.run.stage)}</td>"
                         f"<td>{g.run.round}</td><td>{_n(g.value)} {_e(g.unit)}</td>"
                         f"<td>{_n(g.reference)} ({_e(g.basis)})</td><td>{_e(g.why)}</td></tr>")
        parts.append("</table>")
    return parts


def render_html(report: QualifyReport) -> str:
    ok = "ok" if report.ready else "bad"
    parts = ["<!doctype html><html lang=en><head><meta charset=utf-8>",
             "<title>clusterdiag qualify</title>", f"<style>{_CSS}</style></head><body>",
             f"<header class={ok}><h1>{_e(headline(report))}</h1>",
             f"<p>tests {_e(', '.join(report.tests))} · level {_e(report.level)} · "
             f"{report.duration_s:.1f} s · {len(report.repeated)} repeat(s)</p></header><main>"]
    stragglers = report.stragglers()
    parts.append("<h2>Stragglers and slow links</h2>")
    if stragglers:
        parts.append("<table><tr><th>status</th><th>node</th><th>component</th><th>test</th>"
                     "<th>value</th><th>peers' median</th><th>against the median</th>"
                     "<th>floor</th><th>why</th></tr>")
        for j in stragglers:
            exp = j.expectation
            parts.append(
                f"<tr><td class={j.status.value}>{j.status.value.upper()}</td>"
                f"<td>{_e(j.figure.node)}</td><td><code>{_e(j.figure.component)}</code></td>"
                f"<td>{_e(j.figure.test)}</td><td>{_n(j.figure.value)} {_e(j.figure.unit)}</td>"
                f"<td>{_n(j.median)}</td><td>{_bar(j)}</td>"
                f"<td>{_n(exp.floor if exp else None)}</td><td>{_e(j.why)}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>None.</p>")
    for test, items in _by_test(report).items():
        exp = items[0].expectation
        source = f" — expected {_n(exp.expected)}, floor {_n(exp.floor)} ({_e(exp.source)})" \
            if exp else ""
        parts.append(f"<h2>{_e(TEST_NAMES.get(test, test))} <span class=muted>"
                     f"({_e(items[0].figure.unit)}){source}</span></h2>")
        parts.append("<table><tr><th>node</th><th>component</th><th>value</th>"
                     "<th>peers' median</th><th>against the median</th><th>status</th></tr>")
        for j in sorted(items, key=lambda j: (j.figure.node, j.figure.component)):
            parts.append(f"<tr><td>{_e(j.figure.node)}</td><td><code>{_e(j.figure.component)}"
                         f"</code></td><td>{_n(j.figure.value)}</td><td>{_n(j.median)}</td>"
                         f"<td>{_bar(j)}</td><td class={j.status.value}>{j.status.value}</td>"
                         "</tr>")
        parts.append("</table>")
    parts += _cross_html(report)
    if report.bad_nodes:
        parts.append(f"<h2>Exclude</h2><pre>{_e(fold(report.bad_nodes))}</pre>")
    parts.append("</main></body></html>\n")
    return "".join(parts)
