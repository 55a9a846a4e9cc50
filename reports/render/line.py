"""``--format line``: the verdict in one line for tools that read one — NHC's
``check_cmd_status``, node-problem-detector's custom plugins, cron mail, a monitoring
probe: ``READY``, or ``NOT READY: nvlink.links_up gpu3 17/18; gpu.xid gpu1 79``.

The exit code says the same (0 ready, 1 not). Warnings do not make a node not ready, so a
ready line names none; the table and JSON show them.
"""

from __future__ import annotations

from ...agent.base.inert import shown
from ...checks.core.finding import Finding, Status
from ..model.cluster import ClusterReport, fold
from ..model.node import NodeReport
from ..model.summary import NOT_READY

MAX_PROBLEMS = 8  # a line a person still reads; the rest are counted
_ORDER = (Status.FAIL, Status.ERROR)


def _problem(finding: Finding) -> str:
    where = "" if finding.component in ("", "node") else f" {finding.component}"
    return shown(f"{finding.check}{where} {finding.brief()}")


def _joined(problems: list[str]) -> str:
    more = len(problems) - MAX_PROBLEMS
    return "; ".join(problems[:MAX_PROBLEMS]) + (f"; (+{more} more)" if more > 0 else "")


def node_line(report: NodeReport) -> str:
    bad = sorted((f for f in report.findings if f.status in NOT_READY),
                 key=lambda f: (_ORDER.index(f.status), f.check, f.component))
    if not bad:
        return "READY\n"
    return f"NOT READY: {_joined([_problem(f) for f in bad])}\n"


def cluster_line(report: ClusterReport) -> str:
    """``READY 17/17 nodes``, or the nodes to leave out and what they have."""
    total = len(report.nodes)
    ready = len(report.ready_nodes)
    if report.ready:
        return f"READY {ready}/{total} nodes\n"
    problems = [f"{shown(g.check)} {fold(g.nodes)}" if g.nodes else shown(g.check)
                for g in report.groups() if g.status in NOT_READY]
    bad = fold(report.bad_nodes)
    return (f"NOT READY {ready}/{total} nodes"
            + (f", exclude {bad}" if bad else "") + f": {_joined(problems)}\n")
