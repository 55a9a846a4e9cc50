"""The ``cluster:`` section of the config, checked once and turned into typed settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ClusterShell.NodeSet import NodeSetParseError

from ...agent.base.errors import ConfigError
from ...agent.model.nodeset import expand

# What cluster.versions compares, and how each is called in findings and in ``pinned``.
VERSION_FIELDS = ("driver", "cuda", "nccl", "vbios", "hca_firmware", "kernel", "clusterdiag")
# The smallest excess over the median worth a warning, per outlier metric: a cool cluster
# with one GPU 3 °C warmer has a tiny MAD but nothing wrong.
OUTLIER_MIN_DELTA = {"gpu_temperature_c": 10.0, "ecc_corrected_per_h": 10.0,
                     "pcie_replays_per_h": 10.0, "ib_errors_per_h": 10.0}


@dataclass(frozen=True)
class ClusterSettings:
    expected_trays_per_rack: int = 18
    racks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    pinned: Mapping[str, str] = field(default_factory=dict)
    outlier_mad_k: float = 6.0
    outlier_min_nodes: int = 5
    outlier_min_delta: Mapping[str, float] = field(default_factory=lambda: OUTLIER_MIN_DELTA)


def settings_from(section: Mapping[str, Any], where: str = "config") -> ClusterSettings:
    """Typed settings from ``config.section('cluster')``; one-line ConfigError when wrong."""
    pinned = dict(section.get("pinned") or {})
    for key, value in pinned.items():
        if key not in VERSION_FIELDS:
            raise ConfigError(f"{where}: cluster.pinned: unknown key {key!r} "
                              f"(one of {', '.join(VERSION_FIELDS)})")
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{where}: cluster.pinned.{key} must be a version string")
    racks: dict[str, tuple[str, ...]] = {}
    for name, nodes in (section.get("racks") or {}).items():
        try:
            racks[str(name)] = tuple(expand(str(nodes)))
        except NodeSetParseError as exc:
            raise ConfigError(f"{where}: cluster.racks.{name}: bad node set: {exc}") from None
    delta = dict(OUTLIER_MIN_DELTA)
    for key, value in (section.get("outlier_min_delta") or {}).items():
        if key not in OUTLIER_MIN_DELTA or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: cluster.outlier_min_delta.{key}: expected a number "
                              f"for one of {', '.join(OUTLIER_MIN_DELTA)}")
        delta[key] = float(value)
    return ClusterSettings(
        expected_trays_per_rack=int(section.get("expected_trays_per_rack", 18)),
        racks=racks, pinned={k: str(v) for k, v in pinned.items()},
        outlier_mad_k=float(section.get("outlier_mad_k", 6.0)),
        outlier_min_nodes=int(section.get("outlier_min_nodes", 5)), outlier_min_delta=delta)
