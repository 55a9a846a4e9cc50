"""cluster.outliers: nodes whose error counts or temperatures sit far above their peers.

A GPU 15 °C hotter than its identical neighbours, or a node with a hundred times the
corrected ECC errors of the rest, is the straggler a job will wait on, although it passes
every absolute threshold. Robust statistics (median and MAD, not mean and deviation) keep
one bad node from hiding itself by raising the bar; a minimum excess per metric keeps a
perfectly uniform cluster (MAD 0) from flagging noise.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from ...checks.core.finding import Action, Finding
from ..model.cluster import ClusterFinding
from ..model.summary import NodeSummary
from .common import by_profile, tagged
from .settings import ClusterSettings

CHECK = "cluster.outliers"
MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation
LABELS = {"gpu_temperature_c": "hottest GPU",
          "ecc_corrected_per_h": "corrected ECC errors per hour since boot",
          "pcie_replays_per_h": "PCIe replays per hour since boot",
          "ib_errors_per_h": "InfiniBand port errors per hour since boot"}


def outlying(values: dict[str, float], k: float, min_delta: float) -> tuple[float, dict[str,
                                                                                     float]]:
    """The median, and the nodes above median + max(k·σ̂, min_delta)."""
    median = statistics.median(values.values())
    mad = statistics.median(abs(v - median) for v in values.values())
    bar = median + max(k * MAD_TO_SIGMA * mad, min_delta)
    return median, {node: v for node, v in values.items() if v > bar}


def outliers(nodes: Sequence[NodeSummary], settings: ClusterSettings) -> list[ClusterFinding]:
    findings: list[ClusterFinding] = []
    compared = 0
    for profile, members in sorted(by_profile(nodes).items()):
        if len(members) < settings.outlier_min_nodes:
            continue
        metrics: dict[str, dict[str, float]] = defaultdict(dict)
        for summary in members:
            for name, value in summary.facts.telemetry.items():
                if name in LABELS and isinstance(value, (int, float)):
                    metrics[name][summary.node] = float(value)
        for name, values in sorted(metrics.items()):
            if len(values) < settings.outlier_min_nodes:
                continue
            compared += 1
            median, high = outlying(values, settings.outlier_mad_k,
                                    settings.outlier_min_delta.get(name, 0.0))
            if high:
                findings.append(tagged(CHECK, Finding.warn(
                    name, f"{LABELS[name]} far above the {profile} median",
                    {node: high[node] for node in sorted(high)}, f"about {median:g}",
                    Action.INVESTIGATE), high))
    if not compared:
        return [tagged(CHECK, Finding.skip(
            "cluster", f"needs at least {settings.outlier_min_nodes} nodes of a profile"))]
    if not findings:
        findings.append(tagged(CHECK, Finding.passed("cluster", "no node far above its peers")))
    return findings
