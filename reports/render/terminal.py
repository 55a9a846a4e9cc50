"""The cluster report for a terminal (rich): the verdict first, then the nodes to exclude
as one folded set ready for ``sbatch --exclude=``, then what to fix, grouped across
nodes, most severe first. Passes are counted, not listed. Piped, it is plain text.

Every string from a node report is the agent's, so the console interprets no markup or
emoji codes (``[/]`` or ``[link=…]`` in a message is text), and control characters are
shown escaped (``inert.shown``)."""

from __future__ import annotations

import io
import textwrap

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ...agent.base.inert import shown
from ...checks.core.finding import Status
from ..model.cluster import ClusterReport, ProblemGroup, fold

STYLE = {Status.FAIL: "bold red", Status.ERROR: "bold magenta", Status.WARN: "bold yellow",
         Status.PASS: "green", Status.SKIP: "dim"}
# A group names at most this many components; the rest are counted.
MAX_COMPONENTS = 4
# Below this many columns the problems are blocks of lines, not a table: a table's cells
# would wrap inside check ids and node names.
TABLE_MIN_WIDTH = 120


def verdict_line(report: ClusterReport) -> str:
    gpus, gpus_ready = report.gpu_counts()
    word = "READY" if report.ready else "NOT READY"
    need = f" for a job of {report.need} nodes" if report.need is not None else ""
    return (f"{word}{need}: {len(report.ready_nodes)} of {len(report.nodes)} nodes ready, "
            f"{gpus_ready} of {gpus} GPUs")


def components(group: ProblemGroup) -> str:
    names = sorted(group.components)
    more = f" +{len(names) - MAX_COMPONENTS}" if len(names) > MAX_COMPONENTS else ""
    return shown(", ".join(names[:MAX_COMPONENTS]) + more)


def passes_line(report: ClusterReport) -> str:
    counts = report.finding_counts()
    return (f"{counts['pass']:,} passes and {counts['skip']:,} skips across "
            f"{len(report.nodes):,} nodes (counted per node, not listed)")


def _wrapped(text: str, width: int, indent: str) -> list[str]:
    """Lines of at most ``width`` broken at spaces only: a node set or id longer than a
    line stays whole on its own line rather than being cut."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent]


def _print_block(console: Console, g: ProblemGroup, width: int) -> None:
    """One problem group for a narrow terminal: status, check and action on the first
    line, then the problem, the nodes and where, each wrapped between words."""
    nodes = fold(g.nodes) or "-"
    console.print(Text(f"{g.status.value.upper():5} ", style=STYLE[g.status]),
                  Text(f"{shown(g.check)}  ({g.action.value})"), sep="")
    for line in [*_wrapped(shown(g.message), width, "      "),
                 *_wrapped(f"nodes ({len(set(g.nodes))}): {nodes}", width, "      "),
                 *_wrapped(f"where: {components(g)}", width, "      ")]:
        console.print(Text(line))


def render_terminal(report: ClusterReport, colour: bool = False, width: int = 120) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=colour, no_color=not colour, width=width,
                      highlight=False, soft_wrap=False, markup=False, emoji=False)
    console.print(Text(verdict_line(report),
                       style="bold green" if report.ready else "bold red"))
    bad = fold(report.bad_nodes)
    if bad:
        console.print(f"exclude ({len(report.bad_nodes)}): ", Text(bad, style="bold"), sep="")
        console.print(Text(f"  sbatch --exclude={bad} ...", style="dim"))
    if report.unreachable:
        console.print(f"unreachable ({len(report.unreachable)}): {fold(report.unreachable)}")
    if report.unjudged:
        console.print(f"unjudged, not asked ({len(report.unjudged)}): {fold(report.unjudged)}")
    for blocker in report.cluster_blockers:
        console.print(Text(shown(f"cluster: {blocker.finding.component}: "
                                 f"{blocker.finding.message}"), style="bold red"))
    groups = report.groups()
    if groups and width < TABLE_MIN_WIDTH:
        console.print()
        console.print("problems, most severe first")
        for g in groups:
            _print_block(console, g, width)
    elif groups:
        table = Table(title="problems, most severe first", title_justify="left",
                      show_edge=False, box=None, pad_edge=False, expand=False)
        for name in ("status", "check", "problem", "nodes", "n", "action", "where"):
            table.add_column(name, overflow="fold", no_wrap=name in ("status", "check", "n"))
        for g in groups:
            table.add_row(Text(g.status.value.upper(), style=STYLE[g.status]),
                          Text(shown(g.check)), Text(shown(g.message)),
                          Text(fold(g.nodes) or "-"), str(len(set(g.nodes))),
                          g.action.value, Text(components(g)))
        console.print()
        console.print(table)
    console.print()
    console.print(Text(passes_line(report), style="dim"))
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"
