"""``--format line`` within a byte budget: whole problems, most severe first, the rest
counted as ``+K more``; a first problem too long for the budget is cut at a character
boundary, never inside a UTF-8 sequence."""

from __future__ import annotations

import pytest

from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.reports.cluster_checks import ClusterSettings, judge
from clusterdiag.reports.model.node import NodeReport
from clusterdiag.reports.model.summary import summarize
from clusterdiag.reports.render.line import cluster_line, fitted, node_line
from clusterdiag.reports.render.line_limits import MIN_BYTES


def _report(node: str, *problems: tuple[str, str, str]) -> NodeReport:
    findings = [Finding(Status.FAIL, component, message, check=check)
                for check, component, message in problems]
    return NodeReport(node=node, profile={"name": "dgx-h100"}, version="0.1.0",
                      started_at="2026-03-14T09:12:44+00:00", duration_s=0.1, level="quick",
                      mode="run", findings=[*findings, Finding(Status.PASS, "gpu1", "ok",
                                                               check="gpu.ecc_mode")])


THREE = (("nvlink.links_up", "gpu3", "NVLinks down"), ("gpu.responsive", "gpu0", "lost"),
         ("ib.port_state", "mlx5_0/1", "port down"))


def test_three_problems_fit_80_bytes_and_the_rest_is_counted() -> None:
    line = node_line(_report("gpu001", *THREE))
    assert line == ("NOT READY: gpu.responsive gpu0 lost; ib.port_state mlx5_0/1 port down; "
                    "+1 more\n")
    assert len(line.encode()) - 1 <= 80


def test_a_larger_budget_keeps_every_problem() -> None:
    line = node_line(_report("gpu001", *THREE), max_bytes=4096)
    assert "more" not in line
    assert line.count(";") == 2


@pytest.mark.parametrize("max_bytes", range(MIN_BYTES, 90))
def test_every_budget_is_kept_and_nothing_is_cut_inside_a_character(max_bytes: int) -> None:
    problems = ["gpu.xid gpu0 Xid 79 \u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
                "\u00e9\u00e9\u00e9\u00e9 fallen off the bus", "gpu.xid gpu1 79"]
    line = fitted("NOT READY", problems, max_bytes)
    assert len(line.encode()) <= max_bytes
    assert line.startswith("NOT READY: gpu.")
    assert line.endswith(("+1 more", "gpu1 79"))


def test_the_cluster_line_leaves_out_an_exclude_set_that_leaves_no_room() -> None:
    names = [f"node{i:03d}" for i in range(0, 40, 2)]  # every other: no range folds them
    summaries = [summarize(_report(n, THREE[0]).to_dict()) for n in names]
    report = judge(summaries, [], ClusterSettings(), via="agent")
    assert cluster_line(report) == ("NOT READY 0/20 nodes: nvlink.links_up "
                                    "node[000,002,004,006,008,010,012,014,01...\n")
    assert "exclude node[000,002" in cluster_line(report, max_bytes=1000)
