"""host.cper: APEI/GHES hardware error records judged by their event severity
(checks/host/cper.py). Records are the constructed ones of tests/unit/test_kernel_log_cper.py,
grouped by the collector as it groups a real log."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.collectors.kernel_log import parse_lines
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.checks.core.finding import Action, Finding, Status
from tests.checks.host.factory import NOW, judge, one, statuses
from tests.unit.test_kernel_log_cper import CORRECTED_ARM, FATAL_MEMORY


def with_seq(lines: list[str], seq: int) -> list[str]:
    old = lines[0].split("}", 1)[0] + "}"
    return [line.replace(old, f"{{{seq}}}", 1) for line in lines]


def cper(*records: list[str], age_s: float = 60.0, **params: Any) -> list[Finding]:
    log = parse_lines([line for record in records for line in record], now=NOW)
    for event in log.events:
        event.time = NOW - age_s
    return judge("host.cper", kernel_log=log, **params)


def severity(lines: list[str], word: str) -> list[str]:
    return [line.replace("fatal", word).replace("corrected", word) for line in lines]


def test_fatal_memory_record_fails_naming_the_module() -> None:
    finding = one(cper(FATAL_MEMORY))
    assert (finding.status, finding.action) == (Status.FAIL, Action.INVESTIGATE)
    assert finding.component == "memory.node0.card0.module3"
    assert finding.observed["physical_address"] == "0x000000a1b2c3d000"
    assert finding.observed["records"] == "at least 1"


def test_fatal_arm_processor_record_names_the_cpu_by_mpidr() -> None:
    finding = one(cper(severity(CORRECTED_ARM, "fatal")))
    assert finding.status is Status.FAIL
    assert finding.component == "cpu.mpidr_0x81470000"


def test_recoverable_record_warns() -> None:
    finding = one(cper(severity(FATAL_MEMORY, "recoverable")))
    assert (finding.status, finding.component) == (Status.WARN, "memory.node0.card0.module3")


def test_corrected_records_warn_only_above_the_rate() -> None:
    few = [with_seq(CORRECTED_ARM, seq) for seq in range(1, 5)]  # 4 in 2 h: 48 a day
    assert statuses(cper(*few)) == [Status.PASS]
    many = [with_seq(CORRECTED_ARM, seq) for seq in range(1, 6)]  # 5 in 2 h: 60 a day
    finding = one(cper(*many))
    assert (finding.status, finding.component) == (Status.WARN, "node")
    assert finding.observed["records"] == "at least 5 in 7200 s"
    assert finding.observed["locations"] == {"cpu.mpidr_0x81470000": 5}


def test_records_before_the_window_are_not_judged() -> None:
    assert statuses(cper(FATAL_MEMORY, age_s=8000)) == [Status.PASS]
    assert statuses(cper(FATAL_MEMORY, age_s=8000, window_s=9000)) == [Status.FAIL]


def test_hostile_location_text_never_reaches_the_component() -> None:
    hostile = [line.replace("node:0 card:0 module:3", "node:0 card:\x1b[31m module:../../x")
               for line in FATAL_MEMORY]
    finding = one(cper(hostile))
    assert finding.component == "memory.node0"


def test_unreadable_log_is_an_error() -> None:
    log = KernelLog("kmsg", unknown={"kmsg": "permission denied"})
    assert statuses(judge("host.cper", kernel_log=log)) == [Status.ERROR]
