"""The qualification report as one self-contained HTML file (no script, nothing fetched):
the verdict banner and the nodes to exclude, the convicted and suspect parts with their
figures, expectations, sources and evidence, the cluster findings and the scaling curve
first; then per test the outliers and a count of the rest; then the pair heatmaps, binned
beyond what a screen shows (``qualify_svg``). Its size follows the number of outliers, not
of GPUs: a 1,024-node report is tens of kilobytes. Every string from a node or a tool is
shown inert (``inert.shown``) and HTML-escaped.
"""

from __future__ import annotations

import html

from ...agent.base.inert import shown
from ...checks.core.finding import Status
from ...checks.qualify.judge import TEST_NAMES
from ..model.qualify import Conviction, QualifyReport
from . import qualify_svg as svg
from . import qualify_words as w

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2327;background:#f6f7f7}
main{padding:0 24px 24px}header{padding:14px 24px;color:#fff}
header.ok{background:#1e7e34}header.bad{background:#c62828}header h1{margin:0;font-size:24px}
header p{margin:4px 0 0}h2{font-size:18px;margin:18px 0 6px}h3{font-size:15px;margin:14px 0 4px}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #dcdcde;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f1}.fail{color:#b71c1c}.error{color:#880e4f}.warn{color:#8a6d00}
.pass{color:#1e7e34}.s{font-weight:700;white-space:nowrap}
.bar{background:#e9ecef;width:160px;height:10px;position:relative;margin-top:4px}
.bar>span{position:absolute;left:0;top:0;bottom:0}.bar>i{position:absolute;top:-2px;
bottom:-2px;width:2px;background:#1d2327}
.b-pass{background:#2e7d32}.b-warn{background:#f9a825}.b-fail,.b-error{background:#c62828}
code,pre{font:13px ui-monospace,Menlo,Consolas,monospace}.muted,.src{color:#646970}
.src{font-size:12px}.ev{margin-top:3px}.ev code{background:#fff3f3;padding:0 3px}
.exclude{background:#fff;border:1px solid #ccd0d4;padding:6px 10px;margin:10px 0 0}
.row{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.row table{width:auto}
ul{margin:4px 0;padding-left:20px}"""


def _e(value: object) -> str:
    return html.escape(shown(value), quote=True)


def _bar(value: float | None, reference: float | None, status: Status) -> str:
    """The figure against its reference (the tick at 80 % of the bar's width)."""
    if not reference or value is None:
        return ""
    share = max(0.0, min(1.25, value / reference))
    return (f"<div class=bar title='{share * 100:.1f} % of the reference'>"
            f"<span class='b-{status.value}' style='width:{share * 80:.1f}%'></span>"
            "<i style='left:80%'></i></div>")


def _status(status: Status) -> str:
    return f"<td class='s {status.value}'>{status.value.upper()}</td>"


def _conviction_row(c: Conviction) -> str:
    below = c.below_pct
    against = "-" if c.reference is None else (
        f"{_e(c.basis)} {w.num(c.reference)}"
        + (f" ({-below:+.1f} %)" if below is not None and c.value is not None else ""))
    evidence = f"<div class=ev><code>{_e(w.clipped(c.evidence))}</code></div>" \
        if c.evidence else ""
    source = f"<div class=src>{_e(c.source)}</div>" if c.source else ""
    figure = "-" if c.value is None else f"{w.num(c.value)} {_e(c.unit)}"
    return (f"<tr>{_status(c.status)}<td>{_e(c.node)}</td><td><code>{_e(c.component)}</code>"
            f"</td><td>{_e(c.test)}</td><td>{figure}</td><td>{against}"
            f"{_bar(c.value, c.reference, c.status)}</td><td>"
            f"{_e(w.expected_words(c) or ('-' if not source else ''))}{source}</td>"
            f"<td>{_e(c.message)}{evidence}</td><td>{c.action.value}</td></tr>")


def _convictions(report: QualifyReport) -> list[str]:
    convictions = report.convictions()
    parts = ["<h2>Convicted and suspect parts</h2>"]
    if not convictions:
        return [*parts, "<p>None.</p>"]
    parts.append("<table><tr><th>status</th><th>node</th><th>component</th><th>test</th>"
                 "<th>figure</th><th>against</th><th>expected (source)</th>"
                 "<th>finding and evidence</th><th>action</th></tr>")
    first, folded, left = w.listed(convictions)
    parts += [_conviction_row(c) for c in first]
    parts.append("</table>")
    if folded or left:
        parts.append("<ul>" + "".join(f"<li>{_e(w.folded_words(*item))}</li>"
                                      for item in folded))
        if left:
            parts.append(f"<li>… and {left:,} more kinds of problem (the JSON report lists "
                         "them)</li>")
        parts.append("</ul>")
    return parts


def _cluster_and_scaling(report: QualifyReport) -> list[str]:
    parts = []
    problems = report.cluster_problems()
    if problems:
        parts.append("<h2>Cluster findings</h2><ul>")
        parts += [f"<li><b class={f.status.value}>{f.status.value.upper()}</b> "
                  f"{_e(f.message)} <span class=muted>({_e(f.check)}, {_e(f.component)}, "
                  f"{f.action.value})</span><div class=src>"
                  f"{_e(w.finding_values(f.observed, f.expected))}</div></li>"
                  for f in problems]
        parts.append("</ul>")
    curve = svg.scaling_curve(report.scaling, report.fail_pct)
    if curve:
        parts.append("<h2>Scaling: all-reduce bus bandwidth by node count</h2>"
                     f"<p>{_e(w.scaling_verdict(report) or '')}</p><div class=row>{curve}")
        parts.append("<table><tr><th>nodes</th><th>Ring busbw</th><th>default busbw</th>"
                     "<th>Ring efficiency vs 2 nodes</th><th>status</th></tr>")
        parts += [f"<tr><td>{p.nodes}</td><td>{w.num(p.ring)}</td><td>{w.num(p.default)}</td>"
                  f"<td>{w.efficiency(p.efficiency)}</td>{_status(p.status)}</tr>"
                  for p in report.scaling]
        parts.append("</table></div>")
    return parts


def _tables(report: QualifyReport) -> list[str]:
    tables = report.outlier_tables()
    parts = ["<h2>Per test: the outliers, and the rest counted</h2>"] if tables else []
    for table in tables:
        exp = table.expectation
        source = f" — {_e(exp.source)}" if exp is not None and exp.source else ""
        parts.append(f"<h3>{_e(w.table_title(table))}</h3><p class=muted>"
                     f"{_e(TEST_NAMES.get(table.test, table.test))}{source}</p>")
        rows, more = w.shown_outliers(table)
        if rows:
            parts.append("<table><tr><th>status</th><th>where</th><th>component</th>"
                         "<th>value</th><th>against the reference</th><th>why</th></tr>")
            for o in rows:
                below = o.below_pct
                shift = "" if below is None or o.value is None else f"{-below:+.1f} %"
                parts.append(
                    f"<tr>{_status(o.status)}<td>{_e(o.where)}</td><td><code>"
                    f"{_e(o.component)}</code></td><td>"
                    f"{'a failed run' if o.value is None else w.num(o.value)}</td><td>{shift}"
                    f"{_bar(o.value, o.reference, o.status)}</td><td>{_e(w.clipped(o.why))} "
                    f"<span class=muted>{_e(o.run)}</span></td></tr>")
            parts.append("</table>")
        if more:
            parts.append(f"<p>… and {more:,} more outliers (the JSON report lists every "
                         "figure)</p>")
        parts.append(f"<p>{_e(w.rest_words(table))}</p>")
    return parts


def _between(report: QualifyReport) -> list[str]:
    if not report.schedule:
        return []
    plan = w.schedule_line(report).removeprefix("Between nodes: ")
    parts = ["<h2>Between nodes</h2>", f"<p>{_e(plan)}</p>"]
    convicted = set(report.bad_nodes)
    for test, title in (("pairs", "Pairs: two-node all-reduce (NCCL_ALGO=Ring)"),
                        ("rails", "Rails: ib_write_bw rail to rail (worst rail per pair)"),
                        ("rack", "Rack: tray pairs over multi-node NVLink")):
        picture = svg.pair_heatmap(report.cross, test, convicted)
        if picture:
            legend = svg.legend(report.cross, test)
            parts.append(f"<h3>{_e(title)}</h3><p class=muted>{_e(legend)}</p>{picture}")
    return parts


def _tail(report: QualifyReport) -> list[str]:
    parts = []
    if report.drift:
        parts.append("<h2>Drift from the baseline (slowest first)</h2><ul>")
        parts += [f"<li>{_e(d['node'])} <code>{_e(d['component'])}</code> {_e(d['test'])} "
                  f"{_e(d['value'])} vs {_e(d['baseline'])} {_e(d['unit'])} "
                  f"({d['change_pct']:+.1f} %)</li>" for d in report.drift[:w.MAX_OUTLIERS]]
        parts.append("</ul>")
    if report.drained:
        parts.append("<h2>Drain</h2><ul>")
        parts += [f"<li>{_e(d['node'])}: {'drained' if d['drained'] else 'not drained'} "
                  f"{_e(d['reason'])} {_e(d.get('why') or '')}</li>"
                  for d in report.drained[:w.MAX_LISTED]]
        if len(report.drained) > w.MAX_LISTED:
            parts.append(f"<li>… and {len(report.drained) - w.MAX_LISTED:,} more</li>")
        parts.append("</ul>")
    if report.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(w.clipped(n))}</li>"
                                                    for n in report.notes) + "</ul>")
    return parts


def render_html(report: QualifyReport) -> str:
    ok = "ok" if report.ready else "bad"
    parts = ["<!doctype html><html lang=en><head><meta charset=utf-8>",
             "<title>clusterdiag qualify</title>", f"<style>{CSS}</style></head><body>",
             f"<header class={ok}><h1>{_e(w.headline(report))}</h1>",
             f"<p>{_e(w.run_line(report))}</p></header><main>"]
    if report.bad_nodes:
        parts.append(f"<p class=exclude>exclude ({len(report.bad_nodes):,}): "
                     f"<code>{_e(w.folded(report.bad_nodes))}</code></p>")
    parts += _convictions(report)
    parts += _cluster_and_scaling(report)
    parts += _tables(report)
    parts += _between(report)
    parts += _tail(report)
    parts.append("</main></body></html>\n")
    return "".join(parts)
