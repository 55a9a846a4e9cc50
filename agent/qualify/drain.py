"""``qualify --drain``: the bad nodes drained through ``scontrol`` with a reason that names
the test and the part (``clusterdiag: qualify nic mlx5_4/1 321.9 Gb/s``), by the prolog's
rules (agent/slurm/): never over a reason an operator or Slurm set, and the health check
leaves it alone (``qualify`` is not a check it can see pass again), so a person or a
passing ``qualify`` run lifts it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...checks.core.finding import Finding, Status
from ...checks.qualify.judge import COLLECTIVES
from ..slurm.reason import Reason, Verb, owned, write
from ..slurm.scontrol import Scontrol, SlurmError


@dataclass(frozen=True)
class DrainResult:
    node: str
    reason: str
    drained: bool
    why: str = ""  # why not: an operator's reason, scontrol's error

    def to_dict(self) -> dict[str, object]:
        return {"node": self.node, "reason": self.reason, "drained": self.drained,
                "why": self.why}


def _figure(finding: Finding) -> str:
    observed = finding.observed
    if isinstance(observed, dict) and isinstance(observed.get("value"), (int, float)):
        unit = finding.expected.get("unit", "") if isinstance(finding.expected, dict) else ""
        return f"{observed['value']:g} {unit}".strip()
    return finding.message


def qualify_reason(findings: Iterable[Finding]) -> str | None:
    # The part's own test first: a slow collective (a pair's all-reduce too) only says
    # which part slowed it.
    fails = sorted((f for f in findings if f.status is Status.FAIL),
                   key=lambda f: (f.check.removeprefix("qualify.") in (*COLLECTIVES, "pairs"),
                                  f.check, f.component))
    if not fails:
        return None
    first = fails[0]
    check = first.check.removeprefix("qualify.")
    return write(Reason(Verb.QUALIFY, check, first.component, _figure(first), len(fails) - 1))


def drain_nodes(findings: Mapping[str, list[Finding]], scontrol: Scontrol
                ) -> list[DrainResult]:
    results = []
    for node, own in sorted(findings.items()):
        reason = qualify_reason(own)
        if reason is None:
            continue
        try:
            state = scontrol.show_node(node)
            if not owned(state.reason):
                results.append(DrainResult(node, reason, False,
                                           f"kept the existing reason {state.reason!r}"))
                continue
            scontrol.drain(node, reason)
        except SlurmError as exc:
            results.append(DrainResult(node, reason, False, str(exc)))
            continue
        results.append(DrainResult(node, reason, True))
    return results
