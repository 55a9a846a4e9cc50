"""The cluster report as one self-contained HTML file: no network, no external fonts or
scripts (it is opened from a ticket, on an air-gapped admin host, years later).

The verdict, the problem groups, and a health grid: every node a cell coloured by its
verdict, NVL72 trays in a row per rack; a click on a cell opens its findings. Opening
uses <details>, so it works without JavaScript.
"""

from __future__ import annotations

import html
from collections import defaultdict

from ...agent.base.inert import shown
from ...checks.core.finding import Finding, Status
from ..cluster_checks.common import majority
from ..cluster_checks.profiles import node_sets
from ..model.cluster import ClusterReport, fold
from ..model.summary import NodeSummary
from .terminal import components, passes_line, verdict_line

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2327;
background:#f6f7f7}
main{padding:0 24px 24px}
header{padding:18px 24px;color:#fff}
header.ok{background:#1e7e34}header.bad{background:#c62828}
header h1{margin:0;font-size:32px;letter-spacing:.5px}header p{margin:4px 0 0;font-size:16px}
h2{font-size:18px;margin:22px 0 8px}
code,pre{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre.exclude{background:#fff;border:1px solid #ccd0d4;padding:8px 10px;white-space:pre-wrap}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #dcdcde;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f1}
.s{font-weight:700;white-space:nowrap}
.fail{color:#b71c1c}.error{color:#880e4f}.warn{color:#8a6d00}.pass{color:#1e7e34}.skip{color:#646970}
.grid{display:flex;flex-wrap:wrap;gap:4px;margin:4px 0 12px}
.rack{display:flex;align-items:center;gap:8px;margin:4px 0}
.rack>b{min-width:90px}
details.cell{position:relative}
details.cell>summary{list-style:none;cursor:pointer;padding:4px 6px;border-radius:3px;
font:12px ui-monospace,Menlo,Consolas,monospace;color:#fff;min-width:44px;text-align:center}
details.cell>summary::-webkit-details-marker{display:none}
.v-fail>summary{background:#c62828}.v-error>summary{background:#8e24aa}
.v-warn>summary{background:#f9a825;color:#1d2327}.v-pass>summary,.v-skip>summary{background:#2e7d32}
.v-silent>summary{background:#424242}
details.cell>div{position:absolute;z-index:5;top:100%;left:0;width:460px;background:#fff;
border:1px solid #8c8f94;box-shadow:0 2px 8px rgba(0,0,0,.25);padding:8px;font-size:13px}
details.cell ul{margin:4px 0;padding-left:18px}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;border-radius:3px;color:#fff}
.muted{color:#646970}
"""

_GRID_STATUS = {Status.FAIL: "fail", Status.ERROR: "error", Status.WARN: "warn",
                Status.PASS: "pass", Status.SKIP: "skip"}


def _e(value: object) -> str:
    """Agent text as HTML that shows it: control and bidirectional characters written as
    their escapes first (a page saved or copied into a terminal carries no ESC, and no
    U+202E reorders what is shown), then markup escaped."""
    return html.escape(shown(value), quote=True)


def _finding_item(f: Finding) -> str:
    detail = []
    if f.observed is not None:
        detail.append(f"observed {_e(f.observed)}")
    if f.expected is not None:
        detail.append(f"expected {_e(f.expected)}")
    if f.action.value != "none":
        detail.append(f"action {_e(f.action.value)}")
    tail = f" <span class=muted>({'; '.join(detail)})</span>" if detail else ""
    return (f"<li><span class='s {f.status.value}'>{f.status.value.upper()}</span> "
            f"<code>{_e(f.check)}</code> {_e(f.component)}: {_e(f.message)}{tail}</li>")


def _cell(report: ClusterReport, s: NodeSummary, label: str) -> str:
    verdict = report.node_verdict(s)
    css = "v-silent" if not s.answered else f"v-{_GRID_STATUS[verdict]}"
    problems = [*s.problems, *(c.finding for c in report.cluster_findings_for(s.node))]
    items = "".join(_finding_item(f) for f in problems)
    counts = ", ".join(f"{n} {k}" for k, n in s.counts.items() if n)
    body = (f"<b>{_e(s.node)}</b> · {_e(s.profile)} · {verdict.value.upper()}"
            f"<div class=muted>{_e(counts or 'no report')}</div>"
            + (f"<ul>{items}</ul>" if items else "<div>no problems</div>"))
    return (f"<details class='cell {css}'><summary title='{_e(s.node)}'>{_e(label)}</summary>"
            f"<div>{body}</div></details>")


def _set_profiles(nodes: list[NodeSummary]) -> dict[str, str]:
    """A silent node is shown among its node set's siblings, under their profile."""
    profile = {s.node: s.profile for s in nodes if s.answered}
    placed: dict[str, str] = {}
    for members in node_sets([s.node for s in nodes]):
        known = [profile[n] for n in members if n in profile]
        if known:
            placed.update(dict.fromkeys(members, majority(known)))
    return placed


def _grid(report: ClusterReport) -> str:
    racks: dict[str, list[NodeSummary]] = defaultdict(list)
    others: dict[str, list[NodeSummary]] = defaultdict(list)
    siblings = _set_profiles(report.nodes)
    for s in report.nodes:
        if s.rack:
            racks[s.rack].append(s)
        else:
            others[s.profile if s.answered else siblings.get(s.node, s.profile)].append(s)
    parts = ["<p class=legend><span style='background:#2e7d32'>ready</span>"
             "<span style='background:#f9a825;color:#1d2327'>warning</span>"
             "<span style='background:#c62828'>fail</span>"
             "<span style='background:#8e24aa'>error</span>"
             "<span style='background:#424242'>no report</span> click a node for its "
             "findings</p>"]
    for profile, members in sorted(others.items()):
        cells = "".join(_cell(report, s, s.node) for s in members)
        parts.append(f"<h3>{_e(profile)} ({len(members)})</h3><div class=grid>{cells}</div>")
    if racks:
        parts.append("<h3>NVL72 racks (one row per rack, one cell per tray)</h3>")
    for rack, members in sorted(racks.items()):
        cells = "".join(_cell(report, s, f"{i + 1:02d}") for i, s in enumerate(members))
        parts.append(f"<div class=rack><b>{_e(rack)}</b><div class=grid>{cells}</div></div>")
    return "".join(parts)


def _groups(report: ClusterReport) -> str:
    groups = report.groups()
    if not groups:
        return "<p>No problems.</p>"
    rows = "".join(
        f"<tr><td class='s {g.status.value}'>{g.status.value.upper()}</td>"
        f"<td><code>{_e(g.check)}</code></td><td>{_e(g.message)}</td>"
        f"<td><code>{_e(fold(g.nodes) or '-')}</code></td><td>{len(set(g.nodes))}</td>"
        f"<td>{_e(g.action.value)}</td><td>{_e(components(g))}</td></tr>" for g in groups)
    return ("<table><tr><th>status</th><th>check</th><th>problem</th><th>nodes</th><th>n</th>"
            f"<th>action</th><th>where</th></tr>{rows}</table>")


def render_html(report: ClusterReport) -> str:
    word = "READY" if report.ready else "NOT READY"
    bad = fold(report.bad_nodes)
    exclude = (f"<h2>Exclude ({len(report.bad_nodes)})</h2>"
               f"<pre class=exclude>sbatch --exclude={_e(bad)}</pre>" if bad else "")
    blockers = "".join(f"<p class='s fail'>cluster: {_e(c.finding.component)}: "
                       f"{_e(c.finding.message)} (observed {_e(c.finding.observed)}, "
                       f"expected {_e(c.finding.expected)})</p>"
                       for c in report.cluster_blockers)
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>clusterdiag: {_e(word)}</title>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        f"<style>{CSS}</style></head><body>"
        f"<header class={'ok' if report.ready else 'bad'}><h1>{_e(word)}</h1>"
        f"<p>{_e(verdict_line(report).split(': ', 1)[1])}</p></header><main>"
        f"{exclude}{blockers}<h2>Problems, most severe first</h2>{_groups(report)}"
        f"<h2>Health grid</h2>{_grid(report)}"
        f"<p class=muted>{_e(passes_line(report))}. Generated {_e(report.generated_at)} by "
        f"clusterdiag {_e(report.version)} via {_e(report.via)}.</p>"
        "</main></body></html>\n")
