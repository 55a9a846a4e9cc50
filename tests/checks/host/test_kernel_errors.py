"""host.kernel_errors and the MCE severity it judges by (checks/host/kernel_errors.py)."""

from __future__ import annotations

from typing import Any

import pytest

from clusterdiag.agent.model.kernel import KernelEvent, KernelLog
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.checks.host.kernel_errors import mce_severity
from tests.checks.host.factory import NOW, judge, one, statuses


def event(kind: str, message: str, age_s: float | None = 60.0) -> KernelEvent:
    return KernelEvent(kind, message, f"[ 1.0] {message}",
                       time=None if age_s is None else NOW - age_s)


def kernel_errors(*events: KernelEvent, **params: Any) -> list[Finding]:
    log = KernelLog("file:/var/log/kern.log", events=list(events), lines_read=100)
    return judge("host.kernel_errors", kernel_log=log, **params)


UC_HEADER = "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: be00000000800400"
CE_HEADER = "mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 7: 8c00004000010090"


@pytest.mark.parametrize(("message", "severity"), [
    (UC_HEADER, "uncorrected"),
    (CE_HEADER, "corrected"),
    ("mce: [Hardware Error]: Machine check events logged", "corrected"),
    ("mce: Uncorrected hardware memory error in user-access at 3f2e4c000", "uncorrected"),
    ("mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff8100b2d0> {intel_idle+0x50/0x90}",
     None),
])
def test_mce_severity(message: str, severity: str | None) -> None:
    assert mce_severity(event("mce", message)) == severity


def test_kernel_errors_clean_log_passes() -> None:
    finding = one(kernel_errors(event("mce", CE_HEADER)))
    assert finding.status is Status.PASS
    assert finding.observed["mce_corrected"] == 1


def test_kernel_errors_uncorrected_mce_and_hard_lockup_fail() -> None:
    findings = kernel_errors(event("mce", UC_HEADER),
                             event("hard_lockup", "Watchdog detected hard LOCKUP on cpu 12"))
    assert [(f.status, f.action) for f in findings] == [
        (Status.FAIL, Action.INVESTIGATE), (Status.FAIL, Action.REBOOT)]


def test_kernel_errors_lockups_hung_tasks_and_nmis_warn() -> None:
    findings = kernel_errors(
        event("soft_lockup", "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [nv:42]"),
        event("hung_task", "INFO: task jbd2/md0-8:612 blocked for more than 120 seconds."),
        event("hung_task", "INFO: task python:4242 blocked for more than 120 seconds."),
        event("nmi", "Uhhuh. NMI received for unknown reason 2d on CPU 0."))
    assert statuses(findings) == [Status.WARN] * 3
    assert [f.observed for f in findings] == [1, 2, 1]


def test_kernel_errors_window_and_undated_events() -> None:
    old = event("hard_lockup", "Watchdog detected hard LOCKUP on cpu 1", age_s=8000)
    assert one(kernel_errors(old)).status is Status.PASS
    assert one(kernel_errors(old, window_s=9000)).status is Status.FAIL
    undated = event("hard_lockup", "Watchdog detected hard LOCKUP on cpu 1", age_s=None)
    assert one(kernel_errors(undated)).status is Status.FAIL


def test_kernel_errors_corrected_mce_threshold() -> None:
    logged = event("mce", "mce: [Hardware Error]: Machine check events logged")
    assert one(kernel_errors(*[logged] * 9)).status is Status.PASS
    finding = one(kernel_errors(*[logged] * 10))
    assert (finding.status, finding.observed) == (Status.WARN, 10)


def test_kernel_errors_unreadable_log_is_error() -> None:
    log = KernelLog("kmsg", unknown={"kmsg": "permission denied"})
    finding = one(judge("host.kernel_errors", kernel_log=log))
    assert finding.status is Status.ERROR
    assert finding.observed == {"kmsg": "permission denied"}
