"""ib.port_state, ib.rate and ib.link_layer (checks/ib/ports.py), and
ib.subnet_manager (checks/ib/subnet_manager.py) beside the link layer."""

from __future__ import annotations

from typing import Any

import pytest

from clusterdiag.checks.core.finding import Status
from tests.checks.ib.factory import eight_hcas, make_dev, make_port, make_snap, run, statuses


@pytest.mark.parametrize(("port_kw", "status", "action"), [
    ({}, Status.PASS, "none"),
    ({"state": "DOWN", "phys_state": "Polling"}, Status.FAIL, "reseat_cable"),
    ({"state": "DOWN", "phys_state": "Disabled"}, Status.FAIL, "investigate"),
    ({"state": "INIT"}, Status.FAIL, "investigate"),  # a LID assigned (5), not activated
    ({"state": "ARMED"}, Status.FAIL, "investigate"),
    ({"state": "INIT", "lid": 0, "sm_lid": 0}, Status.FAIL, "investigate"),  # no SM at all
    ({"state": "ACTIVE_DEFER"}, Status.SKIP, "none"),
    ({"state": None}, Status.ERROR, "investigate"),
])
def test_port_state_compute(port_kw: dict[str, Any], status: Status, action: str) -> None:
    found = [f for f in run("ib.port_state", make_snap(eight_hcas(**port_kw)))
             if f.component == "mlx5_3/1"]
    assert [(f.status, f.action.value) for f in found] == [(status, action)]


def test_port_state_names_why_a_linked_port_is_not_active() -> None:
    stuck = run("ib.port_state", make_snap(eight_hcas(state="ARMED")))
    assert [f.message for f in stuck if f.status is Status.FAIL] == [
        "port ARMED with link up: the subnet manager assigned a LID but did not activate it"]
    no_sm = run("ib.port_state", make_snap(eight_hcas(state="INIT", lid=0, sm_lid=0)))
    assert [f.message for f in no_sm if f.status is Status.FAIL] == [
        "port INIT with link up: no subnet manager has configured it"]


def test_port_state_noncompute_warns_and_can_be_ignored() -> None:
    roce = make_dev("mlx5_bond_0", "storage", ports=[make_port(
        link_layer="Ethernet", state="DOWN", netdev="bond0", netdev_operstate="down")])
    findings = run("ib.port_state", make_snap([*eight_hcas(), roce]))
    assert [f.status for f in findings if f.component == "mlx5_bond_0/1"] == [Status.WARN]
    assert Status.FAIL not in statuses(findings)
    ignored = run("ib.port_state", make_snap([*eight_hcas(), roce]), ignore_hcas=["mlx5_bond_0"])
    assert statuses(ignored) == {Status.PASS}


def test_rate() -> None:
    assert statuses(run("ib.rate", make_snap(eight_hcas()))) == {Status.PASS}
    slow = run("ib.rate", make_snap(eight_hcas(rate_gbps=200.0, speed="HDR")))
    assert [f.message for f in slow if f.status is Status.FAIL] == [
        "link trained at a lower speed"]
    narrow = run("ib.rate", make_snap(eight_hcas(rate_gbps=200.0, width="2X")))
    assert [f.message for f in narrow if f.status is Status.FAIL] == [
        "link trained at a lower width"]
    cx8 = [make_dev(f"mlx5_{i}", hca_type="MT4131", ports=[make_port(rate_gbps=10.0, speed="SDR")])
           for i in range(4)]
    old_kernel = run("ib.rate", make_snap(cx8), "gb300-nvl72")
    assert statuses(old_kernel) == {Status.WARN}
    assert "kernel too old to name XDR" in old_kernel[0].message


def test_link_layer_and_subnet_manager() -> None:
    eth = run("ib.link_layer", make_snap(eight_hcas(link_layer="Ethernet")))
    assert [f.action.value for f in eth if f.status is Status.FAIL] == ["fix_config"]
    assert statuses(run("ib.subnet_manager", make_snap(eight_hcas()))) == {Status.PASS}
    no_sm = run("ib.subnet_manager", make_snap(eight_hcas(state="INIT", lid=0, sm_lid=0)))
    assert [f.component for f in no_sm if f.status is Status.FAIL] == ["mlx5_3/1"]
