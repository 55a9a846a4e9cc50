"""``--format line``: the verdict in one line for tools that read one — NHC's
``check_cmd_status``, node-problem-detector's custom plugins, cron mail, a monitoring
probe: ``READY``, or ``NOT READY: nvlink.links_up gpu3 17/18; +1 more``.

The exit code says the same (0 ready, 1 not). Warnings do not make a node not ready, so a
ready line names none; the table and JSON show them.

The line fits in ``max_bytes`` bytes of UTF-8, its newline aside: node-problem-detector
keeps the first ``max_output_length`` bytes of a plugin's output, 80 unless its config
says otherwise (kubernetes/node-problem-detector pkg/custompluginmonitor/types/config.go
line 32, ``defaultMaxOutputLength = 80``; cut in bytes after trimming the newline,
pkg/custompluginmonitor/plugin/plugin.go ``output[:MaxOutputLength]``). Problems are
kept whole, most severe first; those that do not fit are counted, ``+K more``, so a cut
never leaves half a check id that reads as another.
"""

from __future__ import annotations

from ...agent.base.inert import shown
from ...checks.core.finding import Finding, Status
from ..model.cluster import ClusterReport, fold
from ..model.node import NodeReport
from ..model.summary import NOT_READY
from .line_limits import NPD_MAX_OUTPUT

_ORDER = (Status.FAIL, Status.ERROR)
_CUT = "..."


def _size(text: str) -> int:
    return len(text.encode())


def _problem(finding: Finding) -> str:
    where = "" if finding.component in ("", "node") else f" {finding.component}"
    return shown(f"{finding.check}{where} {finding.brief()}")


def _more(count: int) -> str:
    return f"+{count} more" if count else ""


def fitted(head: str, problems: list[str], max_bytes: int) -> str:
    """``head: p1; p2; +K more`` in at most ``max_bytes`` bytes: as many whole problems as
    fit, the rest counted. When not even the first fits whole, it is cut at a character
    boundary and marked ``...``: one problem half-named says more than none."""
    if not problems:
        return head
    for kept in range(len(problems), 0, -1):
        line = f"{head}: " + "; ".join([*problems[:kept], _more(len(problems) - kept)]
                                       if kept < len(problems) else problems)
        if _size(line) <= max_bytes:
            return line
    more = f"; {_more(len(problems) - 1)}" if len(problems) > 1 else ""
    room = max_bytes - _size(f"{head}: {_CUT}{more}")
    if room <= 0:
        return f"{head}: {_more(len(problems))}"
    first = problems[0].encode()[:room].decode(errors="ignore")
    return f"{head}: {first}{_CUT}{more}"


def node_line(report: NodeReport, max_bytes: int = NPD_MAX_OUTPUT) -> str:
    bad = sorted((f for f in report.findings if f.status in NOT_READY),
                 key=lambda f: (_ORDER.index(f.status), f.check, f.component))
    if not bad:
        return "READY\n"
    return fitted("NOT READY", [_problem(f) for f in bad], max_bytes) + "\n"


def cluster_line(report: ClusterReport, max_bytes: int = NPD_MAX_OUTPUT) -> str:
    """``READY 17/17 nodes``, or the nodes to leave out and what they have; the nodes to
    leave out are left out of the line when they alone would not leave room for one
    problem (``--exclude-file`` writes them whole)."""
    total = len(report.nodes)
    ready = len(report.ready_nodes)
    if report.ready:
        return f"READY {ready}/{total} nodes\n"
    problems = [f"{shown(g.check)} {fold(g.nodes)}" if g.nodes else shown(g.check)
                for g in report.groups() if g.status in NOT_READY]
    head = f"NOT READY {ready}/{total} nodes"
    bad = fold(report.bad_nodes)
    if bad and _size(f"{head}, exclude {bad}: {_CUT}; {_more(len(problems))}") <= max_bytes:
        head += f", exclude {bad}"
    return fitted(head, problems, max_bytes) + "\n"
