"""The facts a node report carries for the cross-node checks: error counters as rates."""

from __future__ import annotations

import time

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import assign_roles
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.profiles.profile import load_profile
from clusterdiag.reports.model.facts import cluster_facts


@pytest.fixture(scope="module")
def h100() -> Snapshot:
    env = env_for(NodeSpec("n1", "dgx-h100"))
    snap = collect_snapshot(env, ["pci", "nvml", "host", "infiniband"], time.monotonic() + 20)
    assign_roles(snap, Config(), load_profile("dgx-h100"))  # as a report's judge does
    return snap


def _with(snap: Snapshot, corrected: int, uptime_h: float) -> Snapshot:
    copy = Snapshot.from_dict(snap.to_dict())
    assert copy.nvml is not None
    assert copy.host is not None
    for gpu in copy.nvml.gpus:
        gpu.ecc_volatile_corrected = corrected
    copy.host.boot_time = copy.taken_at - uptime_h * 3600
    return copy


def test_error_counts_become_rates_per_hour_since_boot(h100: Snapshot) -> None:
    """The same total after 100 days and after 10 hours: only the second is a high rate."""
    old = cluster_facts(_with(h100, 1000, 2400))["telemetry"]
    young = cluster_facts(_with(h100, 1000, 10))["telemetry"]
    assert old["ecc_corrected_per_h"] == pytest.approx(8 * 1000 / 2400, rel=1e-3)
    assert young["ecc_corrected_per_h"] == pytest.approx(8 * 1000 / 10, rel=1e-3)
    assert "ib_errors_per_h" in old
    assert "pcie_replays_per_h" in old


def test_a_fresh_boot_counts_as_an_hour(h100: Snapshot) -> None:
    assert cluster_facts(_with(h100, 5, 0.01))["telemetry"]["ecc_corrected_per_h"] == 40.0


def test_without_a_boot_time_only_temperatures_are_compared(h100: Snapshot) -> None:
    snap = _with(h100, 5, 1)
    assert snap.host is not None
    snap.host.boot_time = None
    assert set(cluster_facts(snap)["telemetry"]) == {"gpu_temperature_c"}
