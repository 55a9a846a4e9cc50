"""A real H100 node's InfiniBand tree through the collector and the ib.* checks."""

from __future__ import annotations

import time
from pathlib import Path

from clusterdiag.agent.collectors import ib as ib_collector
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.read.sources import SourceEnv
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.core.rails import assign
from clusterdiag.checks.profiles.profile import load_profile
from tests.checks.ib.factory import make_snap, run, statuses

H100 = Path(__file__).resolve().parents[2] / "fixtures" / "ib" / "gpud-h100"


def test_real_h100_tree_through_the_checks() -> None:
    """The trimmed real tree: the 8 rails pass count, state, rate and link layer; values
    the capture lacks (LIDs, PCI links) are errors, never a crash; saturated counters warn."""
    env = SourceEnv(root=H100)
    devs = ib_collector.collect(env, SourceStats(), time.monotonic() + 10)
    first = make_snap(devs, 1000.0)
    second = make_snap(ib_collector.collect(env, SourceStats(), time.monotonic() + 10), 1003.0)
    for snap in (first, second):  # judge-time roles, as evaluate gives them
        assign(snap, load_profile("dgx-h100"))
    for check_id in ("ib.hca_count", "ib.port_state", "ib.rate", "ib.link_layer",
                     "ib.firmware"):
        assert statuses(run(check_id, second)) == {Status.PASS}, check_id
    assert statuses(run("ib.subnet_manager", second)) == {Status.ERROR}
    assert statuses(run("ib.pcie_link", second)) == {Status.ERROR}
    rates = run("ib.error_rate", second, previous=first)
    assert {f.component for f in rates if f.status is Status.WARN} == {
        f"mlx5_{i}/1" for i in (0, 1, 4, 5, 6, 7, 8, 9)}
    assert Status.FAIL not in statuses(rates)
