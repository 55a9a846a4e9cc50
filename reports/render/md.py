"""The cluster report as Markdown, for a ticket or a wiki page: the same order as the
terminal (verdict, nodes to exclude, problems by severity), tables a wiki renders.

Strings from node reports are the agents', and a Markdown page is rendered to HTML by
whatever shows it: in plain text every ASCII punctuation mark is backslash-escaped
(CommonMark's escape for any of them), so no ``<script>``, link, image or emphasis forms;
a code span is fenced with more backticks than it holds, so nothing closes it early;
control characters are shown escaped first (``inert.shown``).
"""

from __future__ import annotations

import re
import string

from ...agent.base.inert import shown
from ..model.cluster import ClusterReport, fold
from .terminal import components, passes_line, verdict_line

_PUNCTUATION = re.compile(f"([{re.escape(string.punctuation)}])")
_TICKS = re.compile("`+")


def _text(value: object) -> str:
    """Agent text as Markdown that renders to exactly that text."""
    return _PUNCTUATION.sub(r"\\\1", shown(value))


def md_code(value: object) -> str:
    """Agent text as one code span (GFM reads ``\\|`` in it as a pipe, not a cell end)."""
    text = shown(value).replace("|", "\\|")
    fence = "`" * (max((len(m) for m in _TICKS.findall(text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" else ""  # CommonMark strips one each side
    return f"{fence}{pad}{text}{pad}{fence}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_md(report: ClusterReport) -> str:
    lines = [f"# Cluster report: {verdict_line(report)}", "",
             f"Generated {report.generated_at} by clusterdiag {report.version} "
             f"(via {report.via}).", ""]
    if report.bad_nodes:  # validated node names (summary.summarize), safe in a code block
        lines += [f"**Exclude ({len(report.bad_nodes)}):**", "", "```",
                  f"sbatch --exclude={fold(report.bad_nodes)}", "```", ""]
    if report.unreachable:
        lines += [f"**Unreachable ({len(report.unreachable)}):** "
                  f"{md_code(fold(report.unreachable))}", ""]
    for blocker in report.cluster_blockers:
        finding = blocker.finding
        lines += [f"**Cluster:** {_text(finding.component)}: {_text(finding.message)} "
                  f"(observed {md_code(finding.observed)}, expected {md_code(finding.expected)})",
                  ""]
    groups = report.groups()
    if groups:
        lines += ["## Problems, most severe first", "",
                  "| status | check | problem | nodes | n | action | where |",
                  "|---|---|---|---|---|---|---|"]
        for g in groups:
            lines.append(_row([g.status.value.upper(), md_code(g.check), _text(g.message),
                               md_code(fold(g.nodes) or "-"), str(len(set(g.nodes))),
                               g.action.value, _text(components(g))]))
        lines.append("")
    lines += [passes_line(report), ""]
    return "\n".join(lines)
