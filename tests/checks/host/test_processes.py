"""host.dstate_processes (checks/host/processes.py)."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.host import HostInfo, StuckProcess
from clusterdiag.checks.core.finding import Finding, Status
from tests.checks.host.factory import NOW, judge, one


def dstate_sample(*procs: StuckProcess, taken_at: float = NOW - 3,
                  unknown: dict[str, str] | None = None) -> Snapshot:
    return Snapshot("n1", taken_at, host=HostInfo("n1", dstate=list(procs),
                                                    unknown=unknown or {}))


SMI = StuckProcess(1234, "nvidia-smi", 987654, "os_acquire_mutex")
CP = StuckProcess(2345, "cp", 990000, "rpc_wait_bit_killable")
SYNC = StuckProcess(3456, "sync", 990100, None)


def dstate(before: Snapshot | None, *now: StuckProcess, **params: Any) -> list[Finding]:
    return judge("host.dstate_processes", HostInfo("n1", dstate=list(now)), previous=before,
                 **params)


def test_dstate_skips_without_previous_or_when_too_close() -> None:
    assert one(dstate(None, SMI)).status is Status.SKIP
    assert one(dstate(dstate_sample(SMI, taken_at=NOW - 0.5), SMI)).status is Status.SKIP


def test_dstate_same_process_in_both_samples_warns() -> None:
    finding = one(dstate(dstate_sample(SMI, CP), SMI, SYNC))
    assert finding.status is Status.WARN
    assert finding.observed == [{"pid": 1234, "name": "nvidia-smi",
                                 "wchan": "os_acquire_mutex"}]


def test_dstate_reused_pid_is_another_process() -> None:
    reused = StuckProcess(1234, "nvidia-smi", 999999, None)
    assert one(dstate(dstate_sample(SMI), reused)).status is Status.PASS


def test_dstate_many_stuck_fail_and_ignore_list() -> None:
    before = dstate_sample(SMI, CP, SYNC)
    assert one(dstate(before, SMI, CP, SYNC)).status is Status.FAIL
    assert one(dstate(before, SMI, CP, SYNC, ignore=["sync"])).status is Status.WARN
    assert one(dstate(before, SMI, CP, SYNC, fail_count=4)).status is Status.WARN


def test_dstate_unreadable_process_list_is_error() -> None:
    before = dstate_sample(unknown={"dstate": "/proc: missing"})
    assert one(dstate(before, SMI)).status is Status.ERROR
