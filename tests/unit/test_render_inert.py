"""Hostile text is inert in every renderer: a report whose hostnames, components,
messages and evidence carry terminal escapes, BEL, NUL, CR and bidirectional overrides
comes out of each ``--format``, each cluster renderer and the agent's /metrics with none
of those code points raw."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from prometheus_client import generate_latest

from clusterdiag.agent.base.inert import shown
from clusterdiag.agent.cli.options import FORMATS
from clusterdiag.agent.cluster.judge import one_node_report
from clusterdiag.agent.daemon.metrics import AgentView, registry_for
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.reports.cluster_checks import ClusterSettings, judge
from clusterdiag.reports.cluster_checks.reachability import Unreachable
from clusterdiag.reports.model.cluster import ClusterReport
from clusterdiag.reports.model.node import NodeReport
from clusterdiag.reports.model.summary import summarize
from clusterdiag.reports.render.html import render_html
from clusterdiag.reports.render.line import cluster_line, node_line
from clusterdiag.reports.render.md import render_md
from clusterdiag.reports.render.table import render_table
from clusterdiag.reports.render.terminal import render_terminal

# ESC with a colour, BEL, NUL, CR, a C1 CSI, DEL, each Unicode bidirectional control, and
# the line and paragraph separators (U+2028 Zl, U+2029 Zp: line breaks to many readers).
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
SEPARATORS = "\u2028\u2029"
HOSTILE = "\x1b[31mred\x07bel\x00nul\rcr\x9bcsi\x7fdel" + BIDI + SEPARATORS + "end"
RAW = {*"\x1b\x07\x00\r\x9b\x7f", *BIDI, *SEPARATORS}


def _node_report(node: str) -> NodeReport:
    findings = [
        Finding(Status.FAIL, f"gpu3{HOSTILE}", f"NVLinks down {HOSTILE}",
                observed={"line": HOSTILE, "count": 3}, expected=HOSTILE,
                action=Action.RESET_GPU, check="nvlink.links_up"),
        Finding(Status.WARN, "gpu1", f"hot {HOSTILE}", observed=HOSTILE, check="gpu.thermal"),
        Finding(Status.PASS, "gpu1", "ok", check="gpu.ecc_mode"),
    ]
    return NodeReport(node=node, profile={"name": f"dgx{HOSTILE}", "auto_detected": True},
                      version="0.1.0", started_at="2026-03-14T09:12:44+00:00", duration_s=0.1,
                      level="quick", mode="run", findings=findings)


def _cluster() -> ClusterReport:
    """A node that answered with hostile findings, and one that did not, for a reason an
    HTTP answer or a file put there."""
    summary = summarize(_node_report("gpu001").to_dict())
    return judge([summary], [Unreachable(reason=f"answered {HOSTILE}", node="gpu002")],
                 ClusterSettings(), via="agent")


NODE_RENDERERS: dict[str, Callable[[NodeReport], str]] = {
    "table": lambda r: render_table(r) + render_table(r, all_findings=True),
    "json": lambda r: json.dumps(r.to_dict(), indent=2),
    "md": lambda r: render_md(one_node_report(Config(), r, None)),
    "html": lambda r: render_html(one_node_report(Config(), r, None)),
    "line": node_line,
}
CLUSTER_RENDERERS: dict[str, Callable[[ClusterReport], str]] = {
    "table": lambda c: render_terminal(c, width=80) + render_terminal(c, width=160),
    "json": lambda c: json.dumps(c.to_dict(), indent=1),
    "md": render_md,
    "html": render_html,
    "line": cluster_line,
}


def _raw(text: str) -> list[str]:
    return sorted({f"U+{ord(ch):04X}" for ch in text if ch in RAW})


def test_every_format_has_a_renderer_here() -> None:
    assert set(NODE_RENDERERS) == set(FORMATS) == set(CLUSTER_RENDERERS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_node_report_is_inert_in_every_format(fmt: str) -> None:
    # md and html render the node as a cluster of one, which takes host names only.
    node = "gpu001" if fmt in ("md", "html") else f"gpu001{HOSTILE}"
    text = NODE_RENDERERS[fmt](_node_report(node))
    assert "red" in text
    assert _raw(text) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cluster_report_is_inert_in_every_format(fmt: str) -> None:
    text = CLUSTER_RENDERERS[fmt](_cluster())
    assert fmt == "line" or "red" in text  # the line names checks and nodes, no messages
    assert _raw(text) == []


def test_metrics_label_values_are_inert() -> None:
    view = AgentView(report=_node_report(f"gpu001{HOSTILE}"), collections=1)
    text = generate_latest(registry_for(lambda: view)).decode()
    assert 'node="gpu001\\\\x1b[31mred' in text  # shown as its escape, then label-escaped
    assert _raw(text) == []


def test_line_and_paragraph_separators_are_shown_as_escapes() -> None:
    """U+2028 and U+2029 end a line for str.splitlines, JavaScript and many editors: a
    message carrying one would show as two lines, the second looking like our own."""
    assert shown("a\u2028b\u2029c") == "a\\u2028b\\u2029c"
