"""host.cper: APEI/GHES hardware error records judged by their event severity
(checks/host/cper.py). Records are the constructed ones of tests/unit/test_kernel_log_cper.py,
grouped by the collector as it groups a real log."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.collectors.kernel_log import parse_lines
from clusterdiag.agent.model.kernel import BootRecord, KernelLog, PreviousBoot
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


def previous(*records: list[str], booted_s_ago: float = 600.0, read: str = "journalctl -k -b -1",
             **params: Any) -> list[Finding]:
    """host.cper on a clean log of this boot, with the previous boot's records as the
    agent puts them in the snapshot (agent/daemon/boot_records.py)."""
    old = parse_lines([line for record in records for line in record], now=NOW)
    for event in old.events:
        event.time = NOW - booted_s_ago - 120
    log = KernelLog("kmsg", boot_time=NOW - booted_s_ago, lines_read=100)
    log.previous_boot = PreviousBoot(read, [BootRecord(f"cper-{n}", e)
                                            for n, e in enumerate(old.events)])
    return judge("host.cper", kernel_log=log, **params)


def test_fatal_record_of_the_previous_boot_fails_saying_so() -> None:
    finding = one(previous(FATAL_MEMORY))
    assert (finding.status, finding.component) == (Status.FAIL, "memory.node0.card0.module3")
    assert "in the previous boot (at 2023-11-14T22:01:20Z)" in finding.message
    assert finding.observed["clear_with"] == "clusterdiag agent --clear cper-0"


def test_recoverable_record_of_the_previous_boot_warns() -> None:
    finding = one(previous(severity(FATAL_MEMORY, "recoverable")))
    assert (finding.status, finding.component) == (Status.WARN, "memory.node0.card0.module3")


def test_previous_boot_counts_only_for_the_first_hours_after_boot() -> None:
    assert statuses(previous(FATAL_MEMORY, booted_s_ago=50_000)) == [Status.PASS]
    assert statuses(previous(FATAL_MEMORY, booted_s_ago=50_000,
                             previous_boot_s=86_400)) == [Status.FAIL]


def test_why_the_previous_boot_was_not_read_is_a_note_on_the_pass() -> None:
    finding = one(previous(read="not read: no persistent journal"))
    assert finding.status is Status.PASS
    assert finding.observed["previous_boot"] == "not read: no persistent journal"


def bert(record: list[str], booted_s_ago: float = 600.0, **params: Any) -> list[Finding]:
    """host.cper on this boot's log holding the firmware's report (ACPI BERT) of a record
    of the boot before, printed a second after this boot began."""
    lines = ["BERT: Error records from previous boot:",
             *(line.split("}", 1)[1] for line in record[1:])]
    log = parse_lines(lines, now=NOW)
    for event in log.events:
        event.time = NOW - booted_s_ago + 1
    log.boot_time, log.lines_read = NOW - booted_s_ago, 100
    return judge("host.cper", kernel_log=log, **params)


def test_fatal_record_the_firmware_reports_at_this_boot_fails_as_the_previous_boots() -> None:
    finding = one(bert(FATAL_MEMORY))
    assert (finding.status, finding.component) == (Status.FAIL, "memory.node0.card0.module3")
    assert finding.message.endswith("in the previous boot (reported by firmware at this boot)")
    assert "clear_with" not in finding.observed


def test_firmware_reported_records_count_for_the_first_hours_after_boot_only() -> None:
    assert statuses(bert(severity(FATAL_MEMORY, "recoverable"))) == [Status.WARN]
    assert statuses(bert(FATAL_MEMORY, booted_s_ago=50_000)) == [Status.PASS]
