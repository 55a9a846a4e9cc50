"""The node report as a terminal table: summary first, failures before passes.

Coloured only when writing to a terminal; piped output is plain text that greps well.
"""

from __future__ import annotations

from ..checks.finding import Finding, Status
from .node import NodeReport

_COLOURS = {Status.FAIL: "31;1", Status.ERROR: "35;1", Status.WARN: "33;1", Status.PASS: "32",
            Status.SKIP: "2"}
_VERDICT = {Status.FAIL: "NOT READY", Status.ERROR: "NOT READY (could not check everything)",
            Status.WARN: "READY (with warnings)", Status.PASS: "READY", Status.SKIP: "READY"}


def _paint(text: str, status: Status, colour: bool) -> str:
    return f"\x1b[{_COLOURS[status]}m{text}\x1b[0m" if colour else text


def _row(f: Finding, colour: bool) -> str:
    status = _paint(f"{f.status.value.upper():5}", f.status, colour)
    detail = []
    if f.observed is not None:
        detail.append(f"observed={f.observed}")
    if f.expected is not None:
        detail.append(f"expected={f.expected}")
    if f.status in (Status.FAIL, Status.WARN, Status.ERROR) and f.action.value != "none":
        detail.append(f"action={f.action.value}")
    tail = f"  ({', '.join(detail)})" if detail else ""
    return f"  {status} {f.check:24} {f.component:14} {f.message}{tail}"


def render_table(report: NodeReport, colour: bool = False, show_passes: bool = True) -> str:
    counts = {s: 0 for s in Status}
    for f in report.findings:
        counts[f.status] += 1
    verdict = report.verdict
    profile = report.profile
    lines = [
        f"{report.node}: " + _paint(_VERDICT[verdict], verdict, colour),
        f"  profile {profile['name']}"
        f"{' (auto-detected)' if profile.get('auto_detected') else ''}"
        f" · level {report.level} · {report.duration_s:.2f} s"
        f"{' · simulated' if report.simulated else ''}",
        "  " + "  ".join(f"{s.value} {counts[s]}" for s in
                         (Status.FAIL, Status.ERROR, Status.WARN, Status.PASS, Status.SKIP)),
        "",
    ]
    for f in report.findings:
        if f.status in (Status.PASS, Status.SKIP) and not show_passes:
            continue
        lines.append(_row(f, colour))
    return "\n".join(lines) + "\n"
