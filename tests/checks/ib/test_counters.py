"""ib.error_rate, ib.congestion and ib.transport_errors: counters judged as rates
(checks/ib/counters.py)."""

from __future__ import annotations

import copy

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.checks.core.finding import Finding, Status
from tests.checks.ib.factory import eight_hcas, make_snap, run, statuses


def _later(devs: list[IbDevice], dt: float, **growth: int) -> Snapshot:
    later = copy.deepcopy(devs)
    port = later[3].ports[0]
    for name, value in growth.items():
        port.counters[name] = (port.counters.get(name) or 0) + value
    return make_snap(later, 1000.0 + dt)


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
    before = make_snap(eight_hcas())
    found = run("ib.error_rate", _later(eight_hcas(), dt, **growth), previous=before)
    assert {f.status for f in found if f.component == "mlx5_3/1"} == {status}


def test_saturated_counter_warns_never_a_zero_rate() -> None:
    devs = eight_hcas(saturated=["link_downed"])
    devs[3].ports[0].counters["link_downed"] = 255
    found = run("ib.error_rate", make_snap(copy.deepcopy(devs), 1003.0), previous=make_snap(devs))
    bad = [f for f in found if f.status is not Status.PASS]
    assert [(f.component, f.status) for f in bad] == [("mlx5_3/1", Status.WARN)]
    assert "saturated" in bad[0].message


def test_a_saturated_narrow_counter_is_judged_by_the_lower_bound_it_proves() -> None:
    """local_link_integrity_errors is 4 bits: 0 -> 15 in 30 s is at least 15 events, past
    the fail limit (10/min, judged by the count under a minute); 12 -> 15 proves only 3."""
    def pinned(start: int) -> tuple[Snapshot, Snapshot]:
        devs = eight_hcas()
        devs[3].ports[0].counters["local_link_integrity_errors"] = start
        later = copy.deepcopy(devs)
        later[3].ports[0].counters["local_link_integrity_errors"] = 15
        later[3].ports[0].saturated = ["local_link_integrity_errors"]
        return make_snap(devs), make_snap(later, 1030.0)

    before, after = pinned(0)
    found = [f for f in run("ib.error_rate", after, previous=before) if f.status is not
             Status.PASS]
    assert [(f.component, f.status, f.action.value) for f in found] == [
        ("mlx5_3/1", Status.FAIL, "reseat_cable")]
    assert found[0].observed["lower_bound"] is True
    assert found[0].observed["events"] == 15
    before, after = pinned(12)
    found = [f for f in run("ib.error_rate", after, previous=before) if f.status is not
             Status.PASS]
    assert [(f.status, "rate unknown" in f.message) for f in found] == [(Status.WARN, True)]


def _transport(growth: dict[str, int], dt: float) -> list[Finding]:
    def devs(values: dict[str, int]) -> list[IbDevice]:
        out = eight_hcas()
        for dev in out:
            dev.ports[0].hw_counters = {"rnr_nak_retry_err": 0, "local_ack_timeout_err": 0,
                                        "req_cqe_flush_error": 0, "out_of_buffer": 0}
        out[3].ports[0].hw_counters.update(values)
        return out
    before = make_snap(devs({}))
    after = make_snap(devs(growth), 1000.0 + dt)
    return run("ib.transport_errors", after, previous=before)


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
    devs = eight_hcas()
    devs[3].ports[0].hw_counters = {"rnr_nak_retry_err": (1 << 32) - 2}
    later = copy.deepcopy(devs)
    later[3].ports[0].hw_counters = {"rnr_nak_retry_err": 5}  # wrapped: at least 5 since
    found = [f for f in run("ib.transport_errors", make_snap(later, 1030.0),
                             previous=make_snap(devs)) if f.status is Status.FAIL]
    assert [(f.observed["events"], f.observed["reset"]) for f in found] == [(5, True)]
    assert statuses(run("ib.transport_errors", make_snap(eight_hcas()))) == {Status.SKIP}


def test_a_saturated_xmit_wait_is_routine_not_a_warning() -> None:
    """The 32-bit port_xmit_wait fills up on any busy link; the error counters do not."""
    devs = eight_hcas(saturated=["port_xmit_wait"])
    devs[3].ports[0].counters["port_xmit_wait"] = 4294967295
    found = run("ib.congestion", make_snap(copy.deepcopy(devs), 1003.0), previous=make_snap(devs))
    assert statuses(found) == {Status.PASS}
    note = next(f for f in found if f.component == "mlx5_3/1")
    assert "port_xmit_wait at its 32-bit maximum" in str(note.observed)


def test_congestion_and_rate_skips() -> None:
    found = run("ib.congestion", _later(eight_hcas(), 2.0, port_xmit_wait=10_000_000),
                 previous=make_snap(eight_hcas()))
    assert [f.component for f in found if f.status is Status.WARN] == ["mlx5_3/1"]
    assert statuses(run("ib.congestion", make_snap(eight_hcas()))) == {Status.SKIP}
