"""The simulated IB side: the tree reads like the kernel's, counters move between samples
when a fault says so (and stop at their maximum), and specs name real HCAs only."""

from __future__ import annotations

import os
import re
import time

import pytest

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec, parse_spec
from clusterdiag.agent.sim.state import counter as sim_counter
from clusterdiag.checks.core.finding import Status


def test_tree_links_like_the_kernel() -> None:
    env = env_for(NodeSpec("n1", "dgx-h100"))
    ib = env.root / "sys/class/infiniband"
    assert ib.joinpath("mlx5_0").is_symlink()
    real = os.path.realpath(ib / "mlx5_0/device")
    assert real.endswith("/0000:14:01.0/0000:15:00.0/0000:17:00.0/0000:18:00.0")
    assert (env.root / "sys/class/net/ibp24s0/operstate").read_text() == "up\n"
    assert (ib / "mlx5_1/ports/1/gid_attrs/ndevs/0").read_text() == "enp42s0f0np0\n"


@pytest.mark.parametrize("wall_step_s", [0.0, 3600.0, -3600.0], ids=["steady", "ahead", "behind"])
def test_fault_counters_move_between_samples_and_saturate(wall_step_s: float,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """However the wall clock stepped since the simulator was imported (an NTP step on a
    freshly booted CI machine), the hardware's counters keep counting: they run on the
    monotonic clock, epoch included."""
    monkeypatch.setattr(sim_counter, "_WALL_MINUS_MONOTONIC",
                        sim_counter._WALL_MINUS_MONOTONIC - wall_step_s)
    env = env_for(NodeSpec("n1", "dgx-h100", faults=[
        {"node": "n1", "kind": "ib_symbol_errors", "hca": "mlx5_3"}]))

    def symbol_errors() -> int | None:
        snap = collect_snapshot(env, ["infiniband"], time.monotonic() + 5)
        dev = next(d for d in snap.infiniband or [] if d.name == "mlx5_3")
        return dev.ports[0].counters["symbol_error"]

    first = symbol_errors()
    time.sleep(0.3)
    second = symbol_errors()
    assert first is not None
    assert second is not None
    assert second > first
    assert second <= 65535  # a 16-bit IBA counter never reads above its maximum


@pytest.mark.parametrize(("profile", "hca"), [("gb200-nvl72", "mlx5_2"),
                                              ("dgx-h100", "mlx5_7")])
def test_roce_netdev_down_caught_on_other_profiles(profile: str, hca: str) -> None:
    env = env_for(NodeSpec("n1", profile, rack="r1" if "nvl" in profile else None, faults=[
        {"node": "n1", "kind": "roce_netdev_down", "hca": hca}]))
    report = run_node(env, Config(), RunOptions(profile=profile, patterns=("ib.*",)))
    bad = [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]
    assert [(f.check, f.component, f.status) for f in bad] == [
        ("ib.port_state", f"{hca}/1", Status.WARN)]


@pytest.mark.parametrize(("fault", "message"), [
    ({"kind": "ib_port_down", "hca": "mlx5_99"}, "no HCA 'mlx5_99' on dgx-h100"),
    ({"kind": "ib_port_down", "hca": "mlx5_0", "port": 2}, "mlx5_0 has no port 2"),
    ({"kind": "roce_netdev_down", "hca": "mlx5_0"}, "not a RoCE (Ethernet) port"),
    ({"kind": "ib_rate_degraded", "hca": "mlx5_1"}, "mlx5_1 is not a compute HCA"),
    ({"kind": "ib_port_down", "hca": "mlx5_0", "lane": 1}, "unknown key 'lane'"),
])
def test_spec_rejects_hcas_the_node_lacks(fault: dict[str, object], message: str) -> None:
    data = {"nodes": [{"names": "n1", "profile": "dgx-h100"}],
            "faults": [{"node": "n1", **fault}]}
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_spec(data, "spec.yaml")


def test_hgx_pcie_profile_has_no_rdma_devices() -> None:
    env = env_for(NodeSpec("n1", "hgx-h100-pcie"))
    snap = collect_snapshot(env, ["infiniband"], time.monotonic() + 5)
    assert snap.infiniband == []
    assert (env.root / "sys/class/net/eno3/operstate").read_text() == "up\n"
