"""Each ib.* check's pass, warn and fail on constructed snapshots, plus the real H100 tree
through the whole check catalog."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.collectors import ib as ib_collector
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.ib import IbDevice, IbPort
from clusterdiag.agent.model.kernel import KernelEvent, KernelLog
from clusterdiag.agent.sources import SourceEnv
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.finding import Finding, Status
from clusterdiag.checks.ib.roles import assign
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import CheckContext

H100 = Path(__file__).resolve().parents[1] / "fixtures" / "ib" / "gpud-h100"


def _port(**kw: Any) -> IbPort:
    base: dict[str, Any] = {"port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                            "rate_gbps": 400.0, "width": "4X", "speed": "NDR",
                            "link_layer": "InfiniBand", "lid": 5, "sm_lid": 1,
                            "counters": {"symbol_error": 0, "link_downed": 0,
                                         "link_error_recovery": 0, "port_rcv_errors": 0,
                                         "port_xmit_wait": 0, "port_xmit_discards": 0}}
    base.update(kw)
    return IbPort(**base)


def _dev(name: str, role: str = "compute", **kw: Any) -> IbDevice:
    base: dict[str, Any] = {"fw_ver": "28.41.1000", "hca_type": "MT4129",
                            "pci_bdf": "0000:aa:00.0", "role": role,
                            "excluded": role != "compute", "pcie_speed_gts": 32.0,
                            "pcie_width": 16, "ports": [_port()]}
    base.update(kw)
    return IbDevice(name=name, **base)


def _snap(devs: list[IbDevice], at: float = 1000.0, log: KernelLog | None = None) -> Snapshot:
    return Snapshot(node="n1", taken_at=at, infiniband=devs, kernel_log=log)


def _run(check_id: str, snap: Snapshot, profile: str = "dgx-h100",
         previous: Snapshot | None = None, **params: Any) -> list[Finding]:
    spec = REGISTRY[check_id]
    ctx = CheckContext(snapshot=snap, profile=load_profile(profile),
                       params={**spec.params, **params}, level="full", now=snap.taken_at,
                       previous=previous)
    return list(spec.func(ctx))


def _statuses(findings: list[Finding]) -> set[Status]:
    return {f.status for f in findings}


def _eight(**port_kw: Any) -> list[IbDevice]:
    devs = [_dev(f"mlx5_{i}", pci_bdf=f"0000:{0x18 + i:02x}:00.0") for i in range(8)]
    if port_kw:
        devs[3].ports = [_port(**port_kw)]
    return devs


def test_hca_count() -> None:
    assert _statuses(_run("ib.hca_count", _snap(_eight()))) == {Status.PASS}
    short = _run("ib.hca_count", _snap([*_eight()[:7], _dev("mlx5_bond_0", "storage")]))
    assert _statuses(short) == {Status.FAIL}
    assert short[0].observed["count"] == 7
    assert _statuses(_run("ib.hca_count", _snap([*_eight(), _dev("x")]))) == {Status.WARN}
    assert _statuses(_run("ib.hca_count", _snap([]), "generic")) == {Status.SKIP}


def test_hca_count_is_an_error_when_an_unreadable_hca_could_make_up_the_count() -> None:
    unreadable = _dev("mlx5_7", "unknown", role_reason="link_layer: [Errno 13] Permission denied")
    short = _run("ib.hca_count", _snap([*_eight()[:7], unreadable]))
    assert _statuses(short) == {Status.ERROR}
    assert "mlx5_7" in short[0].message
    assert "Permission denied" in short[0].message
    # counting the unreadable one as compute still leaves too few: a definite fail
    shorter = _run("ib.hca_count", _snap([*_eight()[:6], unreadable]))
    assert _statuses(shorter) == {Status.FAIL}


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
    found = [f for f in _run("ib.port_state", _snap(_eight(**port_kw)))
             if f.component == "mlx5_3/1"]
    assert [(f.status, f.action.value) for f in found] == [(status, action)]


def test_port_state_names_why_a_linked_port_is_not_active() -> None:
    stuck = _run("ib.port_state", _snap(_eight(state="ARMED")))
    assert [f.message for f in stuck if f.status is Status.FAIL] == [
        "port ARMED with link up: the subnet manager assigned a LID but did not activate it"]
    no_sm = _run("ib.port_state", _snap(_eight(state="INIT", lid=0, sm_lid=0)))
    assert [f.message for f in no_sm if f.status is Status.FAIL] == [
        "port INIT with link up: no subnet manager has configured it"]


def test_port_state_noncompute_warns_and_can_be_ignored() -> None:
    roce = _dev("mlx5_bond_0", "storage", ports=[_port(
        link_layer="Ethernet", state="DOWN", netdev="bond0", netdev_operstate="down")])
    findings = _run("ib.port_state", _snap([*_eight(), roce]))
    assert [f.status for f in findings if f.component == "mlx5_bond_0/1"] == [Status.WARN]
    assert Status.FAIL not in _statuses(findings)
    ignored = _run("ib.port_state", _snap([*_eight(), roce]), ignore_hcas=["mlx5_bond_0"])
    assert _statuses(ignored) == {Status.PASS}


def test_rate() -> None:
    assert _statuses(_run("ib.rate", _snap(_eight()))) == {Status.PASS}
    slow = _run("ib.rate", _snap(_eight(rate_gbps=200.0, speed="HDR")))
    assert [f.message for f in slow if f.status is Status.FAIL] == [
        "link trained at a lower speed"]
    narrow = _run("ib.rate", _snap(_eight(rate_gbps=200.0, width="2X")))
    assert [f.message for f in narrow if f.status is Status.FAIL] == [
        "link trained at a lower width"]
    cx8 = [_dev(f"mlx5_{i}", hca_type="MT4131", ports=[_port(rate_gbps=10.0, speed="SDR")])
           for i in range(4)]
    old_kernel = _run("ib.rate", _snap(cx8), "gb300-nvl72")
    assert _statuses(old_kernel) == {Status.WARN}
    assert "kernel too old to name XDR" in old_kernel[0].message


def test_link_layer_and_subnet_manager() -> None:
    eth = _run("ib.link_layer", _snap(_eight(link_layer="Ethernet")))
    assert [f.action.value for f in eth if f.status is Status.FAIL] == ["fix_config"]
    assert _statuses(_run("ib.subnet_manager", _snap(_eight()))) == {Status.PASS}
    no_sm = _run("ib.subnet_manager", _snap(_eight(state="INIT", lid=0, sm_lid=0)))
    assert [f.component for f in no_sm if f.status is Status.FAIL] == ["mlx5_3/1"]


def test_pcie_link_and_firmware() -> None:
    devs = _eight()
    devs[2].pcie_width = 8
    found = _run("ib.pcie_link", _snap(devs))
    assert [f.component for f in found if f.status is Status.FAIL] == ["mlx5_2"]
    devs[5].fw_ver = "28.39.1002"
    fw = _run("ib.firmware", _snap(devs))
    assert [(f.component, f.status) for f in fw if f.status is not Status.PASS] == [
        ("mlx5_5", Status.WARN)]
    pinned = _run("ib.firmware", _snap(devs), expected={"MT4129": "28.39.1002"})
    assert len([f for f in pinned if f.status is Status.FAIL]) == 7


def test_kernel_errors_names_the_hca() -> None:
    devs = _eight()
    line = f"mlx5_core {devs[1].pci_bdf}: poll_health:813:(pid 0): Fatal error 1 detected"
    log = KernelLog("file:x", events=[
        KernelEvent("mlx5_health", line, line, device=devs[1].pci_bdf, time=990.0),
        KernelEvent("module_temperature", "High temperature on sensors", "t", time=990.0),
        KernelEvent("mlx5_health", "old", "old", device=devs[1].pci_bdf, time=1.0)],
        lines_read=3)
    found = _run("ib.kernel_errors", _snap(devs, log=log), window_s=100)
    assert {(f.component, f.status, f.action.value) for f in found} == {
        ("mlx5_1", Status.FAIL, "reboot"), ("node", Status.WARN, "investigate")}
    assert [f.observed["count"] for f in found if f.component == "mlx5_1"] == [1]
    clean = _run("ib.kernel_errors", _snap(devs, log=KernelLog("file:x", lines_read=5)))
    assert _statuses(clean) == {Status.PASS}


def _later(devs: list[IbDevice], dt: float, **growth: int) -> Snapshot:
    later = copy.deepcopy(devs)
    port = later[3].ports[0]
    for name, value in growth.items():
        port.counters[name] = (port.counters.get(name) or 0) + value
    return _snap(later, 1000.0 + dt)


@pytest.mark.parametrize(("growth", "dt", "status"), [
    ({}, 3.0, Status.PASS),
    ({"symbol_error": 2}, 3.0, Status.PASS),  # below min_events: no verdict
    ({"symbol_error": 50}, 3.0, Status.WARN),  # > 10 in under a minute
    ({"symbol_error": 500}, 3.0, Status.FAIL),
    ({"symbol_error": 50}, 600.0, Status.PASS),  # 5/min over ten minutes
    ({"link_downed": 1}, 3.0, Status.WARN),
    ({"link_downed": 2}, 3.0, Status.FAIL),
    ({"link_error_recovery": 1}, 3.0, Status.WARN),
])
def test_error_rate(growth: dict[str, int], dt: float, status: Status) -> None:
    before = _snap(_eight())
    found = _run("ib.error_rate", _later(_eight(), dt, **growth), previous=before)
    assert {f.status for f in found if f.component == "mlx5_3/1"} == {status}


def test_saturated_counter_warns_never_a_zero_rate() -> None:
    devs = _eight(saturated=["link_downed"])
    devs[3].ports[0].counters["link_downed"] = 255
    found = _run("ib.error_rate", _snap(copy.deepcopy(devs), 1003.0), previous=_snap(devs))
    bad = [f for f in found if f.status is not Status.PASS]
    assert [(f.component, f.status) for f in bad] == [("mlx5_3/1", Status.WARN)]
    assert "saturated" in bad[0].message


def test_a_saturated_narrow_counter_is_judged_by_the_lower_bound_it_proves() -> None:
    """local_link_integrity_errors is 4 bits: 0 -> 15 in 30 s is at least 15 events, past
    the fail limit (10/min, judged by the count under a minute); 12 -> 15 proves only 3."""
    def pinned(start: int) -> tuple[Snapshot, Snapshot]:
        devs = _eight()
        devs[3].ports[0].counters["local_link_integrity_errors"] = start
        later = copy.deepcopy(devs)
        later[3].ports[0].counters["local_link_integrity_errors"] = 15
        later[3].ports[0].saturated = ["local_link_integrity_errors"]
        return _snap(devs), _snap(later, 1030.0)

    before, after = pinned(0)
    found = [f for f in _run("ib.error_rate", after, previous=before) if f.status is not
             Status.PASS]
    assert [(f.component, f.status, f.action.value) for f in found] == [
        ("mlx5_3/1", Status.FAIL, "reseat_cable")]
    assert found[0].observed["lower_bound"] is True
    assert found[0].observed["events"] == 15
    before, after = pinned(12)
    found = [f for f in _run("ib.error_rate", after, previous=before) if f.status is not
             Status.PASS]
    assert [(f.status, "rate unknown" in f.message) for f in found] == [(Status.WARN, True)]


def _transport(growth: dict[str, int], dt: float) -> list[Finding]:
    def devs(values: dict[str, int]) -> list[IbDevice]:
        out = _eight()
        for dev in out:
            dev.ports[0].hw_counters = {"rnr_nak_retry_err": 0, "local_ack_timeout_err": 0,
                                        "req_cqe_flush_error": 0, "out_of_buffer": 0}
        out[3].ports[0].hw_counters.update(values)
        return out
    before = _snap(devs({}))
    after = _snap(devs(growth), 1000.0 + dt)
    return _run("ib.transport_errors", after, previous=before)


@pytest.mark.parametrize(("growth", "dt", "status"), [
    ({}, 30.0, Status.PASS),
    ({"rnr_nak_retry_err": 2}, 30.0, Status.PASS),  # below min_events: no verdict
    ({"rnr_nak_retry_err": 3}, 600.0, Status.FAIL),  # any increase fails (NVSentinel fatal)
    ({"local_ack_timeout_err": 50}, 30.0, Status.PASS),  # 50 in 30 s: not over 60
    ({"local_ack_timeout_err": 300}, 120.0, Status.WARN),  # 150/min > 60/min (1/s)
    ({"local_ack_timeout_err": 300}, 600.0, Status.PASS),  # 30/min
    ({"req_cqe_flush_error": 10_000}, 30.0, Status.PASS),  # QP teardown: not judged
    ({"out_of_buffer": 20_000}, 30.0, Status.WARN),  # > 600 in under a minute
])
def test_transport_errors(growth: dict[str, int], dt: float, status: Status) -> None:
    found = [f for f in _transport(growth, dt) if f.component == "mlx5_3/1"]
    assert {f.status for f in found} == {status}
    assert all(f.action.value == "investigate" for f in found if f.status is not Status.PASS)


def test_transport_counters_wrap_at_32_bits_as_a_lower_bound() -> None:
    devs = _eight()
    devs[3].ports[0].hw_counters = {"rnr_nak_retry_err": (1 << 32) - 2}
    later = copy.deepcopy(devs)
    later[3].ports[0].hw_counters = {"rnr_nak_retry_err": 5}  # wrapped: at least 5 since
    found = [f for f in _run("ib.transport_errors", _snap(later, 1030.0),
                             previous=_snap(devs)) if f.status is Status.FAIL]
    assert [(f.observed["events"], f.observed["reset"]) for f in found] == [(5, True)]
    assert _statuses(_run("ib.transport_errors", _snap(_eight()))) == {Status.SKIP}


def test_a_saturated_xmit_wait_is_routine_not_a_warning() -> None:
    """The 32-bit port_xmit_wait fills up on any busy link; the error counters do not."""
    devs = _eight(saturated=["port_xmit_wait"])
    devs[3].ports[0].counters["port_xmit_wait"] = 4294967295
    found = _run("ib.congestion", _snap(copy.deepcopy(devs), 1003.0), previous=_snap(devs))
    assert _statuses(found) == {Status.PASS}
    note = next(f for f in found if f.component == "mlx5_3/1")
    assert "port_xmit_wait at its 32-bit maximum" in str(note.observed)


def test_congestion_and_rate_skips() -> None:
    found = _run("ib.congestion", _later(_eight(), 2.0, port_xmit_wait=10_000_000),
                 previous=_snap(_eight()))
    assert [f.component for f in found if f.status is Status.WARN] == ["mlx5_3/1"]
    assert _statuses(_run("ib.congestion", _snap(_eight()))) == {Status.SKIP}


def test_real_h100_tree_through_the_checks() -> None:
    """The trimmed real tree: the 8 rails pass count, state, rate and link layer; values
    the capture lacks (LIDs, PCI links) are errors, never a crash; saturated counters warn."""
    env = SourceEnv(root=H100)
    devs = ib_collector.collect(env, SourceStats(), time.monotonic() + 10)
    first = _snap(devs, 1000.0)
    second = _snap(ib_collector.collect(env, SourceStats(), time.monotonic() + 10), 1003.0)
    for snap in (first, second):  # judge-time roles, as evaluate gives them
        assign(snap, load_profile("dgx-h100"), {})
    for check_id in ("ib.hca_count", "ib.port_state", "ib.rate", "ib.link_layer",
                     "ib.firmware"):
        assert _statuses(_run(check_id, second)) == {Status.PASS}, check_id
    assert _statuses(_run("ib.subnet_manager", second)) == {Status.ERROR}
    assert _statuses(_run("ib.pcie_link", second)) == {Status.ERROR}
    rates = _run("ib.error_rate", second, previous=first)
    assert {f.component for f in rates if f.status is Status.WARN} == {
        f"mlx5_{i}/1" for i in (0, 1, 4, 5, 6, 7, 8, 9)}
    assert Status.FAIL not in _statuses(rates)
