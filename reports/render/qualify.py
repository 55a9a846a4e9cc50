"""The qualification report for a terminal (rich) and as Markdown; the HTML report is
``qualify_html`` (``render_html`` is re-exported here).

All three lead with the verdict, then each part that is not ready or suspect (node,
component, test, its figure against its peers' median and the profile's expectation with
its source, the line its tool printed), then the cluster-level findings, then the scaling
curve; then per test only the outliers and one line counting the rest and their spread, so
that a report of 1,024 nodes is a few hundred lines, not a row per GPU. Everything that came
from a node or a tool is made inert: shown escaped in a terminal (``inert.shown``: control
and bidirectional characters written as their escapes, no rich markup), backslash-escaped
in Markdown, HTML-escaped in HTML.
"""

from __future__ import annotations

import io
import re
import textwrap

from rich.console import Console
from rich.text import Text

from ...agent.base.inert import shown
from ...checks.core.finding import Status
from ...checks.qualify.judge import TEST_NAMES
from ..model.qualify import QualifyReport
from . import qualify_words as w
from .md import md_code
from .qualify_html import render_html

__all__ = ["render_html", "render_md", "render_terminal"]

STYLE = {Status.FAIL: "bold red", Status.ERROR: "bold magenta", Status.WARN: "bold yellow",
         Status.PASS: "green", Status.SKIP: "dim"}
INDENT = "     "
_MARKUP = re.compile(r"([\\`*_\[\]<>!&|~#])")


class _Screen:
    """Lines of at most ``width`` columns, wrapped between words with a hanging indent,
    every piece of text shown inert; a status word painted when ``colour``."""

    def __init__(self, width: int, colour: bool) -> None:
        self.width = max(40, width)
        self.buffer = io.StringIO()
        self.console = Console(file=self.buffer, force_terminal=colour, no_color=not colour,
                               width=self.width, highlight=False, soft_wrap=True, markup=False,
                               emoji=False)

    def _wrap(self, text: str, indent: str, hanging: str) -> list[str]:
        return textwrap.wrap(shown(text), self.width, initial_indent=indent,
                             subsequent_indent=hanging, break_long_words=False,
                             break_on_hyphens=False) or [indent]

    def line(self, text: str = "", indent: str = "", style: str = "") -> None:
        for piece in self._wrap(text, indent, indent + "  ") if text else [""]:
            self.console.print(Text(piece, style=style))

    def status(self, status: Status, text: str, indent: str = "") -> None:
        """``FAIL n0133 gpu5 ...``: the status word painted, the rest wrapped under it."""
        word = status.value.upper()
        lines = self._wrap(f"{word} {text}", indent, indent + INDENT)
        first = lines[0]
        at = len(indent) + len(word)
        self.console.print(Text(first[:len(indent)]), Text(first[len(indent):at],
                                                            style=STYLE[status]),
                           Text(first[at:]), sep="")
        for piece in lines[1:]:
            self.console.print(Text(piece))

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.buffer.getvalue().splitlines()) + "\n"


def _convictions(screen: _Screen, report: QualifyReport) -> None:
    convictions = report.convictions()
    if not convictions:
        screen.line("Convicted and suspect parts: none")
        return
    screen.line("Convicted (not ready) and suspect parts, worst first:")
    first, folded, left = w.listed(convictions)
    for c in first:
        screen.status(c.status, f"{w.part(c)} -> {c.action.value}")
        screen.line(c.message, INDENT)
        measured = w.measured_words(c)
        if measured:
            screen.line(measured, INDENT)
        if c.source:
            screen.line(f"source: {c.source}", INDENT, "dim")
        if c.evidence:
            screen.line(f"evidence: {w.clipped(c.evidence)}", INDENT)
    for status, test, message, nodes in folded:
        screen.status(status, w.folded_words(status, test, message, nodes)
                      .removeprefix(status.value.upper() + " "))
    if left:
        screen.line(f"… and {left:,} more kinds of problem (the JSON report lists them)")


def _cluster(screen: _Screen, report: QualifyReport) -> None:
    problems = report.cluster_problems()
    if not problems:
        return
    screen.line()
    screen.line("Cluster findings:")
    for f in problems:
        screen.status(f.status, f.message)
        values = w.finding_values(f.observed, f.expected)
        if values:
            screen.line(values, INDENT)
        screen.line(f"{f.check} · {f.component} -> {f.action.value}", INDENT, "dim")


def _scaling(screen: _Screen, report: QualifyReport) -> None:
    if not report.scaling:
        return
    screen.line()
    screen.line("Scaling: all-reduce busbw (GB/s) by node count, Ring efficiency vs 2 nodes:")
    screen.line(f"  {'nodes':>6}  {'Ring':>8}  {'default':>8}  {'efficiency':>10}")
    for p in report.scaling:
        screen.line(f"  {p.nodes:>6}  {w.num(p.ring):>8}  {w.num(p.default):>8}  "
                    f"{w.efficiency(p.efficiency):>10}  {p.status.value}",
                    style="" if p.status is Status.PASS else STYLE[p.status])
    verdict = w.scaling_verdict(report)
    if verdict:
        screen.line(verdict, "  ")


def _tables(screen: _Screen, report: QualifyReport) -> None:
    tables = report.outlier_tables()
    if not tables:
        return
    screen.line()
    screen.line("Per test: the outliers, and the rest counted:")
    for table in tables:
        screen.line(f"{w.table_title(table)}: {TEST_NAMES.get(table.test, table.test)}", "  ")
        if table.expectation is not None and table.expectation.source:
            screen.line(f"source: {table.expectation.source}", INDENT, "dim")
        rows, more = w.shown_outliers(table)
        for o in rows:
            screen.status(o.status, w.outlier_words(o), "    ")
        if more:
            screen.line(f"… and {more:,} more outliers (the JSON report lists every figure)",
                        "    ")
        screen.line(w.rest_words(table), "    ")


def _tail(screen: _Screen, report: QualifyReport) -> None:
    if report.mode == "logs":
        rows = report.run_rows()
        screen.line()
        screen.line("Per file:")
        for item in rows[:w.MAX_OUTLIERS * 5]:
            figure = item["figure"]
            value = f"{figure['value']} {figure['unit']} ({figure['detail']})" if figure else "-"
            screen.line(f"{item['verdict'].upper():5} {item['node']}: {item['tool']} "
                        f"{item['test']} {value}", "  ")
        if len(rows) > w.MAX_OUTLIERS * 5:
            screen.line(f"… and {len(rows) - w.MAX_OUTLIERS * 5:,} more files", "  ")
    if report.schedule:
        screen.line()
        screen.line(w.schedule_line(report))
    if report.drift:
        screen.line()
        screen.line("Drift from the baseline (slowest first):")
        for d in report.drift[:w.MAX_OUTLIERS]:
            screen.line(f"{d['node']} {d['component']} {d['test']} {d['value']} vs "
                        f"{d['baseline']} {d['unit']} ({d['change_pct']:+.1f} %)", "  ")
    if report.drained:
        screen.line()
        screen.line("Drain:")
        for d in report.drained[:w.MAX_LISTED]:
            screen.line(f"{d['node']}: {'drained' if d['drained'] else 'not drained'} "
                        f"{d['reason']} {d.get('why') or ''}".rstrip(), "  ")
        if len(report.drained) > w.MAX_LISTED:
            screen.line(f"… and {len(report.drained) - w.MAX_LISTED:,} more", "  ")
    for note in report.notes:
        screen.line(f"note: {w.clipped(note)}")
    if report.bad_nodes:
        screen.line()
        screen.line(f"exclude: {w.folded(report.bad_nodes)}")


def render_terminal(report: QualifyReport, width: int = 160, colour: bool = False) -> str:
    screen = _Screen(width, colour)
    screen.line(w.headline(report), style="bold green" if report.ready else "bold red")
    screen.line(w.run_line(report), style="dim")
    screen.line()
    _convictions(screen, report)
    _cluster(screen, report)
    _scaling(screen, report)
    _tables(screen, report)
    _tail(screen, report)
    return screen.text()


def _md(value: object) -> str:
    """Text as Markdown that renders to that text: every character that could open HTML,
    an entity, a link, an image, emphasis, a heading or a code span (or end a table cell)
    is backslash-escaped (CommonMark escapes any ASCII punctuation), so a node or tool that
    names itself ``<img onerror=...>`` is shown, not run; the rest stays readable."""
    return _MARKUP.sub(r"\\\1", shown(value))


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _md_convictions(report: QualifyReport) -> list[str]:
    convictions = report.convictions()
    out = ["## Convicted and suspect parts", ""]
    if not convictions:
        return [*out, "None.", ""]
    out += [_row(["status", "node", "component", "test", "figure", "expected", "source",
                  "finding", "evidence", "action"]), "|---" * 10 + "|"]
    first, folded, left = w.listed(convictions)
    for c in first:
        out.append(_row([f"**{c.status.value.upper()}**", _md(c.node), _md(c.component),
                         _md(f"qualify.{c.test}"), _md(w.figure_words(c) or "-"),
                         _md(w.expected_words(c) or "-"),
                         _md(c.source or "-"),
                         _md(c.message), _md(w.clipped(c.evidence) if c.evidence else "-"),
                         c.action.value]))
    out.append("")
    out += [f"- {_md(w.folded_words(*item))}" for item in folded]
    if left:
        out.append(f"- … and {left:,} more kinds of problem (the JSON report lists them)")
    return [*out, ""] if folded or left else out


def _md_tables(report: QualifyReport) -> list[str]:
    out = ["## Per test: the outliers, and the rest counted", ""]
    for table in report.outlier_tables():
        out += [f"### {_md(w.table_title(table))}", "",
                _md(TEST_NAMES.get(table.test, table.test)) + (
                    f" (source: {_md(table.expectation.source)})"
                    if table.expectation is not None and table.expectation.source else ""), ""]
        rows, more = w.shown_outliers(table)
        if rows:
            out += [_row(["status", "where", "component", "value", "against the reference",
                          "why"]), "|---" * 6 + "|"]
            for o in rows:
                below = o.below_pct
                out.append(_row([o.status.value.upper(), _md(o.where), _md(o.component),
                                 "a failed run" if o.value is None else w.num(o.value),
                                 "-" if below is None or o.value is None else f"{-below:+.1f} %",
                                 _md(f"{w.clipped(o.why)} {o.run}".strip() or "-")]))
            out.append("")
        if more:
            out += [f"… and {more:,} more outliers (the JSON report lists every figure).", ""]
        out += [_md(w.rest_words(table)) + ".", ""]
    return out


def render_md(report: QualifyReport) -> str:
    out = [f"# {_md(w.headline(report))}", "", _md(w.run_line(report)) + ".", ""]
    out += _md_convictions(report)
    problems = report.cluster_problems()
    if problems:
        out += ["## Cluster findings", ""]
        out += [f"- {f.status.value.upper()} {_md(f.message)} ({_md(f.check)}, "
                f"{_md(f.component)}, {f.action.value})"
                + (f": {_md(values)}" if (values := w.finding_values(f.observed, f.expected))
                   else "") for f in problems]
        out.append("")
    if report.scaling:
        out += ["## Scaling", "", _row(["nodes", "Ring busbw (GB/s)", "default busbw (GB/s)",
                                        "Ring efficiency vs 2 nodes", "status"]),
                "|---" * 5 + "|"]
        out += [_row([str(p.nodes), w.num(p.ring), w.num(p.default), w.efficiency(p.efficiency),
                      p.status.value]) for p in report.scaling]
        out += ["", _md(w.scaling_verdict(report) or ""), ""]
    out += _md_tables(report)
    if report.schedule:
        out += [_md(w.schedule_line(report)), ""]
    out += [f"Note: {_md(w.clipped(note))}" for note in report.notes]
    if report.bad_nodes:
        out += ["", f"Exclude: {md_code(w.folded(report.bad_nodes))}"]
    return "\n".join(out) + "\n"
