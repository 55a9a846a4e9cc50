"""cluster.versions: the software and firmware stack agrees among nodes of one profile.

A job whose ranks run different drivers or NCCL builds can hang or slow down in ways no
single node shows. Nodes are compared only with nodes of their own profile: a GB200 rack
legitimately runs another driver branch and kernel than the DGX H100 nodes beside it.
Without a pin the minority is a warning (which side is right is a human call); a pinned
version makes every node that differs a fail.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...checks.core.finding import Action, Finding
from ..model.cluster import ClusterFinding
from ..model.summary import NodeSummary
from .common import by_profile, majority, minority_by_value, observed_sets, tagged
from .settings import VERSION_FIELDS, ClusterSettings

CHECK = "cluster.versions"
LABELS = {"driver": "GPU driver", "cuda": "CUDA driver API", "nccl": "NCCL", "vbios": "VBIOS",
          "hca_firmware": "HCA firmware", "kernel": "kernel", "clusterdiag": "clusterdiag"}


def _value(summary: NodeSummary, name: str) -> str | None:
    if name == "clusterdiag":
        return summary.version or None
    value = getattr(summary.facts, name)
    return str(value) if value is not None else None


def versions(nodes: Sequence[NodeSummary], settings: ClusterSettings) -> list[ClusterFinding]:
    findings: list[ClusterFinding] = []
    for profile, members in sorted(by_profile(nodes).items()):
        for name in VERSION_FIELDS:
            values = [(s.node, v) for s in members if (v := _value(s, name)) is not None]
            if not values:
                continue
            label = LABELS[name]
            pinned = settings.pinned.get(name)
            if pinned is not None:
                odd = minority_by_value(values, pinned)
                if odd:
                    findings.append(tagged(CHECK, Finding.fail(
                        name, f"{label} is not the pinned version", observed_sets(odd), pinned,
                        Action.FIX_CONFIG), (n for group in odd.values() for n in group)))
                continue
            common = majority(v for _, v in values)
            odd = minority_by_value(values, common)
            if odd:
                findings.append(tagged(CHECK, Finding.warn(
                    name, f"{label} differs from the majority of {profile} nodes",
                    observed_sets(odd), common, Action.FIX_CONFIG),
                    (n for group in odd.values() for n in group)))
    if not findings:
        findings.append(tagged(CHECK, Finding.passed(
            "cluster", "versions agree within each profile")))
    return findings
