"""cluster.nvl_domain: each NVL72 rack is one whole, healthy NVLink domain.

A tray's own checks see only its four GPUs; whether the rack around it agrees — every
tray present, registered with the fabric, in the rack's cluster UUID and partition
(clique) — is visible only across trays. The odd tray is named, not the whole rack.
Racks come from config (``cluster.racks``: name -> node set, for exact tray names and
racks split into partitions) or, without it, from the cluster UUID the trays report.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import cache

from ...checks.core.finding import Action, Finding
from ...checks.profiles.profile import UnknownProfileError, load_profile
from ..model.cluster import ClusterFinding, fold
from ..model.summary import NodeSummary
from .common import majority, minority_by_value, observed_sets, tagged
from .settings import ClusterSettings

CHECK = "cluster.nvl_domain"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
FABRIC_COMPLETED = 3


@cache
def is_tray(profile: str) -> bool:
    try:
        return load_profile(profile).nvl72
    except UnknownProfileError:
        return False


def domain(summary: NodeSummary) -> tuple[str, int] | None:
    values = [(str(g.get("cluster_uuid")), int(g.get("clique_id") or 0))
              for g in summary.facts.fabric]
    return majority(values) if values else None


def _racks(trays: Sequence[NodeSummary], settings: ClusterSettings
           ) -> dict[str, list[NodeSummary]]:
    by_name = {s.node: s for s in trays}
    racks: dict[str, list[NodeSummary]] = defaultdict(list)
    placed: set[str] = set()
    for rack, names in settings.racks.items():
        for name in names:
            if name in by_name:
                racks[rack].append(by_name[name])
                placed.add(name)
    for summary in trays:
        if summary.node in placed:
            continue
        pair = domain(summary)
        uuid = pair[0] if pair else ZERO_UUID
        racks["unassigned" if uuid == ZERO_UUID else f"nvl-{uuid[:8]}"].append(summary)
    return dict(racks)


def _check_rack(rack: str, trays: list[NodeSummary], settings: ClusterSettings,
                unreachable: set[str]) -> list[ClusterFinding]:
    component = f"rack {rack}"
    found: list[ClusterFinding] = []
    if rack == "unassigned":
        return [tagged(CHECK, Finding.fail(
            component, "tray not in any NVLink domain (zero cluster UUID or clique)",
            fold(s.node for s in trays), "a cluster UUID and clique id",
            Action.INVESTIGATE), (s.node for s in trays))]
    unregistered = [s.node for s in trays
                    if any(g.get("state") != FABRIC_COMPLETED for g in s.facts.fabric)]
    if unregistered:
        found.append(tagged(CHECK, Finding.fail(
            component, "tray has not completed NVLink fabric registration",
            fold(unregistered), "completed on every tray", Action.INVESTIGATE), unregistered))
    domains = [(s.node, d) for s in trays if (d := domain(s)) is not None]
    if domains:
        common = majority(d for _, d in domains)
        odd = minority_by_value(domains, common)
        if odd:
            found.append(tagged(CHECK, Finding.fail(
                component, "tray in another NVLink partition than its rack",
                observed_sets(odd, lambda d: f"{d[0]}/{d[1]}"), f"{common[0]}/{common[1]}",
                Action.INVESTIGATE), (n for group in odd.values() for n in group)))
    configured = settings.racks.get(rack)
    expected = len(configured) if configured else settings.expected_trays_per_rack
    present = {s.node for s in trays}
    silent = set(configured or ()) & unreachable  # cluster.reachability already names them
    if len(present) + len(silent) < expected:
        missing = [n for n in configured or () if n not in present and n not in silent]
        # A warning, not a blocker: a run over part of a rack (a job on four trays) is as
        # ready as those trays are; the missing ones are named for whoever runs the rack.
        found.append(tagged(CHECK, Finding.warn(
            component, "rack has fewer trays than expected",
            {"trays": len(present), "missing": fold(missing)} if missing else len(present),
            expected, Action.INVESTIGATE)))
    if not found:
        found.append(tagged(CHECK, Finding.passed(
            component, "NVLink domain complete, registered, one partition", len(present),
            expected)))
    return found


def nvl_domain(nodes: Sequence[NodeSummary], settings: ClusterSettings) -> list[ClusterFinding]:
    trays = [s for s in nodes if s.answered and is_tray(s.profile)]
    if not trays:
        return [tagged(CHECK, Finding.skip("cluster", "no NVL72 trays in this cluster"))]
    unreachable = {s.node for s in nodes if not s.answered}
    for rack, names in settings.racks.items():  # silent trays still belong in the rack grid
        for summary in nodes:
            if not summary.answered and summary.node in names:
                summary.rack = rack
    findings: list[ClusterFinding] = []
    for rack, members in sorted(_racks(trays, settings).items()):
        for summary in members:
            summary.rack = rack
        findings.extend(_check_rack(rack, members, settings, unreachable))
    return findings
