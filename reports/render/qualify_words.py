"""The words the three qualification reports share (terminal, Markdown, HTML): the verdict
line, a convicted part's figure against its peers and its expectation, the per-test line that
counts the rest, and the limits that keep a report of 1,024 nodes a page a person reads.

These return raw text, node names and tool output included: each renderer makes it inert
for its medium (``inert.shown`` for a terminal, escaped Markdown, escaped HTML).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ...agent.base.hostname import is_node_name
from ...checks.core.finding import Status
from ..model.cluster import fold
from ..model.qualify import Conviction, Outlier, OutlierTable, QualifyReport, natural_key

# Parts listed one by one, worst first; the rest are folded by problem, MAX_FOLDED lines.
MAX_LISTED = 30
MAX_FOLDED = 10
MAX_OUTLIERS = 20  # rows of a per-test table; the rest of its outliers are counted
MAX_TEXT = 300  # characters of one line a tool printed, of a note, of a node set in prose


def num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 100 else f"{value:,.1f}"


def clipped(text: object, limit: int = MAX_TEXT) -> str:
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more " \
        "characters in the JSON report)"


def folded(nodes: Iterable[str]) -> str:
    """Node names as one node set (``n[0133,0420]``) where every one is a host name; else
    listed as they are (a saved log's file name, ``run[a].log``, is no node set: folding it
    would fail, and ``x!y`` would fold to ``x``)."""
    names = sorted(set(nodes), key=natural_key)
    return fold(names) if all(is_node_name(n) for n in names) else ", ".join(names)


def nodes_words(nodes: list[str]) -> str:
    folded_nodes = folded(nodes)
    return folded_nodes if len(folded_nodes) <= MAX_TEXT else \
        f"{len(set(nodes)):,} nodes (the exclude list names them)"


def headline(report: QualifyReport) -> str:
    nodes = len(report.cluster.nodes)
    bad = report.bad_nodes
    word = "READY" if report.ready else "NOT READY"
    tail = f"{len(bad)} of {nodes} node(s) not ready: {nodes_words(bad)}" if bad else \
        f"all {nodes} node(s) qualified"
    if report.verdict is Status.WARN and report.ready:
        tail += " (with warnings)"
    return f"QUALIFY {word} ({report.verdict.value.upper()}): {tail}"


def run_line(report: QualifyReport) -> str:
    return (f"tests {', '.join(report.tests)} · level {report.level} · "
            f"{report.duration_s:.1f} s · {len(report.repeated)} repeat(s) · mode {report.mode}")


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


def efficiency(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def figure_words(c: Conviction) -> str:
    """``307.6 Gb/s vs peers' median 392.1 (-21.5 %)``, or "" where no figure was judged."""
    if c.value is None:
        return ""
    words = f"{num(c.value)} {c.unit}".rstrip()
    below = c.below_pct
    if c.reference is not None:
        words += f" vs {c.basis or 'reference'} {num(c.reference)}"
        words += f" ({-below:+.1f} %)" if below is not None else ""
    return words


def expectation_words(expected: float | None, floor: float | None, source: str = "") -> str:
    """``expected 400, floor 380``; "" where the profile's entry gives only its source."""
    if expected is None and floor is None:
        return "" if source else "no expected figure in the profile"
    return ", ".join(part for part in (f"expected {num(expected)}" if expected is not None
                                       else "", f"floor {num(floor)}" if floor is not None
                                       else "") if part)


def expected_words(c: Conviction) -> str:
    """The expectation beside a figure; "" for a part with none (a run that failed)."""
    return "" if c.value is None else expectation_words(c.expected, c.floor, c.source)


def measured_words(c: Conviction) -> str:
    """The figure, its reference and the expectation on one line, or ""."""
    figure = figure_words(c)
    if not figure:
        return ""
    expectation = expected_words(c)
    return f"{figure}; {expectation}" if expectation else figure


def values_words(value: object) -> str:
    """A finding's observed or expected value in a few words: its plain items."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {num(v) if isinstance(v, float) else v}"
                         for k, v in value.items() if isinstance(v, (str, int, float)))
    if isinstance(value, (str, int, float)):
        return str(value)
    return ""


def finding_values(observed: object, expected: object) -> str:
    """``observed: median 49, nodes 1024; expected: expected 51, source ...``."""
    parts = [f"{label}: {clipped(words)}" for label, words in (
        ("observed", values_words(observed)), ("expected", values_words(expected))) if words]
    return "; ".join(parts)


def part(c: Conviction) -> str:
    """Where: ``n0133 gpu5 qualify.gpu_compute``."""
    return f"{c.node} {c.component} qualify.{c.test}"


def listed(convictions: list[Conviction]
           ) -> tuple[list[Conviction], list[tuple[Status, str, str, list[str]]], int]:
    """The first MAX_LISTED parts, then the rest folded by (status, check, message) into
    at most MAX_FOLDED lines, and how many folded lines were left out."""
    groups: dict[tuple[Status, str, str], list[str]] = defaultdict(list)
    for c in convictions[MAX_LISTED:]:
        groups[(c.status, c.test, c.message)].append(c.node)
    rest = [(status, test, message, nodes) for (status, test, message), nodes in
            sorted(groups.items(), key=lambda kv: -len(kv[1]))]
    return convictions[:MAX_LISTED], rest[:MAX_FOLDED], max(0, len(rest) - MAX_FOLDED)


def folded_words(status: Status, test: str, message: str, nodes: list[str]) -> str:
    return (f"{status.value.upper()} qualify.{test} {message} on {len(set(nodes)):,} "
            f"node(s): {nodes_words(nodes)}")


def table_title(table: OutlierTable) -> str:
    """``qualify.nic: GB/s, peers' median 392.1; expected 400, floor 380``."""
    words = f"qualify.{table.test} ({table.unit})"
    if table.reference is not None:
        words += f", {table.basis} {num(table.reference)}"
    exp = table.expectation
    if exp is not None:
        words += f"; {expectation_words(exp.expected, exp.floor, exp.source)}"
    return words


def outlier_words(o: Outlier) -> str:
    """``n0133 gpu5 42,817.7 (-20.3 %) more than 10 % below peers``."""
    value = "a failed run" if o.value is None else num(o.value)
    below = o.below_pct
    shift = f" ({-below:+.1f} %)" if below is not None and o.value is not None else ""
    run = f" [{o.run}]" if o.run else ""
    return f"{o.where} {o.component} {value}{shift}{run} {clipped(o.why)}".rstrip()


def shown_outliers(table: OutlierTable) -> tuple[list[Outlier], int]:
    return table.outliers[:MAX_OUTLIERS], max(0, len(table.outliers) - MAX_OUTLIERS)


def rest_words(table: OutlierTable) -> str:
    """``8,183 more components within 1.0 % of the peers' median (53,170.2 to 54,240.1)``."""
    if table.outliers:
        words = f"{table.rest:,} more {table.noun}"
    else:
        words = f"{'all ' if table.rest > 1 else ''}{table.rest:,} {table.noun}"
    spread = table.spread_pct
    if spread is not None:
        words += f" within {spread:.1f} % of the {table.basis}"
    if table.low is not None and table.high is not None:
        words += f" ({num(table.low)} to {num(table.high)} {table.unit})"
    return words


def convicted_nodes(report: QualifyReport) -> list[str]:
    return sorted(report.bad_nodes, key=natural_key)
