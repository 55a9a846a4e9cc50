"""The cluster report as Markdown, for a ticket or a wiki page: the same order as the
terminal (verdict, nodes to exclude, problems by severity), tables a wiki renders."""

from __future__ import annotations

from .cluster import ClusterReport, fold
from .render_terminal import components, passes_line, verdict_line


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_md(report: ClusterReport) -> str:
    lines = [f"# Cluster report: {verdict_line(report)}", "",
             f"Generated {report.generated_at} by clusterdiag {report.version} "
             f"(via {report.via}).", ""]
    if report.bad_nodes:
        lines += [f"**Exclude ({len(report.bad_nodes)}):**", "", "```",
                  f"sbatch --exclude={fold(report.bad_nodes)}", "```", ""]
    if report.unreachable:
        lines += [f"**Unreachable ({len(report.unreachable)}):** `{fold(report.unreachable)}`",
                  ""]
    for blocker in report.cluster_blockers:
        lines += [f"**Cluster:** {blocker.finding.component}: {blocker.finding.message} "
                  f"(observed `{blocker.finding.observed}`, expected "
                  f"`{blocker.finding.expected}`)", ""]
    groups = report.groups()
    if groups:
        lines += ["## Problems, most severe first", "",
                  "| status | check | problem | nodes | n | action | where |",
                  "|---|---|---|---|---|---|---|"]
        for g in groups:
            lines.append("| " + " | ".join(_cell(v) for v in (
                g.status.value.upper(), f"`{g.check}`", g.message, f"`{fold(g.nodes) or '-'}`",
                len(set(g.nodes)), g.action.value, components(g))) + " |")
        lines.append("")
    lines += [passes_line(report), ""]
    return "\n".join(lines)
