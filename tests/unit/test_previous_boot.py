"""The previous boot's kernel log, read at the agent's start: journalctl's answers and
failures (agent/collectors/previous_boot.py), and the records kept as the agent's events
until cleared or a later reboot (agent/daemon/boot_records.py)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.collectors import previous_boot
from clusterdiag.agent.daemon import boot_records, sticky
from clusterdiag.agent.daemon.state import CPER, Events, StateDir
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import NvmlInfo
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.agent.read.sources import CommandResult, run_command
from tests.unit.test_kernel_log_cper import CORRECTED_ARM, FATAL_MEMORY

NOW = 1_700_000_000.0
# As journalctl -o short-iso-precise prints a kernel line (systemd src/shared/logs-show.c).
STAMP = "2023-11-14T22:11:30.123456+0000 gb200-t01 kernel: "


def journal(lines: list[str]) -> str:
    return "".join(f"{STAMP}{line}\n" for line in lines)


class Runner:
    """journalctl's answer, and the argvs it was asked."""

    def __init__(self, result: CommandResult | None = None, stdout: str = "") -> None:
        self.result, self.stdout, self.asked = result, stdout, []  # type: ignore[var-annotated]

    def __call__(self, argv: list[str], timeout_s: float) -> CommandResult:
        self.asked.append((argv, timeout_s))
        return self.result or CommandResult(argv, 0, self.stdout)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "var/log/journal").mkdir(parents=True)
    return tmp_path


def test_a_fatal_record_is_read_with_its_time_and_a_stable_id(root: Path) -> None:
    runner = Runner(stdout=journal(["Command line: ro quiet", *FATAL_MEMORY,
                                    *CORRECTED_ARM]))
    found = previous_boot.read(runner, root, NOW)
    ((argv, timeout),) = runner.asked
    assert argv[:7] == ["journalctl", "-k", "-b", "-1", "-o", "short-iso-precise",
                        "--no-pager"]
    assert argv[-2:] == ["-D", str(root / "var/log/journal")]
    assert timeout == 10.0
    assert found.read.startswith("journalctl -k -b -1: 20 lines, 1 fatal or recoverable")
    (record,) = found.records  # the corrected record is not kept
    assert record.event.time == 1_699_999_890.123456
    assert "event severity: fatal" in record.event.message
    assert record.id == previous_boot.read(Runner(stdout=runner.stdout), root, NOW).records[0].id


def test_the_firmwares_report_in_that_boot_is_of_the_boot_before_it(root: Path) -> None:
    bert = ["BERT: Error records from previous boot:",
            *(line.split("}", 1)[1] for line in FATAL_MEMORY[1:])]
    found = previous_boot.read(Runner(stdout=journal(bert)), root, NOW)
    assert found.records == []


@pytest.mark.parametrize(("result", "said"), [
    (CommandResult([], None, error="journalctl: not found"), "not read: journalctl: not found"),
    (CommandResult([], None, error="journalctl: no answer within 10 s"),
     "not read: journalctl: no answer within 10 s"),
    (CommandResult([], 1, "", "Data from the specified boot (-1) is not available: No such "
                              "boot ID in journal\n"),
     "not read: journalctl exit 1: Data from the specified boot (-1) is not available"),
    (CommandResult([], 0, "", "Specifying boot ID or boot offset has no effect, no "
                              "persistent journal was found.\n"),
     "not read: Specifying boot ID or boot offset has no effect"),
])
def test_what_journalctl_cannot_give_is_a_note(root: Path, result: CommandResult,
                                                said: str) -> None:
    found = previous_boot.read(Runner(result), root, NOW)
    assert found.read.startswith(said)
    assert found.records == []


def test_a_journal_that_is_not_persistent_is_never_asked(tmp_path: Path) -> None:
    runner = Runner()
    found = previous_boot.read(runner, tmp_path, NOW)
    assert runner.asked == []
    assert "no persistent journal" in found.read


def test_the_real_root_reads_the_machine_journal(root: Path) -> None:
    assert "-D" not in previous_boot.argv_for(Path("/"))


def test_hostile_output_is_bounded(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer past MAX_BYTES keeps its newest part; a record's lines are cut; never
    more than MAX_PREVIOUS_BOOT_RECORDS records."""
    monkeypatch.setattr(previous_boot, "MAX_BYTES", 8192)
    filler = [f"line {n}" for n in range(2000)]
    found = previous_boot.read(Runner(stdout=journal([*filler, *FATAL_MEMORY])), root, NOW)
    assert "output cut to its last 8,192 bytes" in found.read
    assert len(found.records) == 1
    assert found.read.startswith("journalctl -k -b -1: 1")
    assert "2,0" not in found.read
    monkeypatch.setattr(previous_boot, "MAX_BYTES", 32 << 20)
    long = [*FATAL_MEMORY[:-1], FATAL_MEMORY[-1] + "x" * 100_000]
    (record,) = previous_boot.read(Runner(stdout=journal(long)), root, NOW).records
    assert len(record.event.raw) < 8 * 4096
    many = [line.replace("{3}", f"{{{n}}}") for n in range(40) for line in FATAL_MEMORY]
    assert len(previous_boot.read(Runner(stdout=journal(many)), root, NOW).records) == 16


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="journalctl not installed")
def test_real_journalctl_on_a_journal_without_an_earlier_boot(root: Path) -> None:
    """systemd's own journalctl, asked for the previous boot of an empty journal
    directory: a note, never a record or a crash."""
    found = previous_boot.read(run_command, root, time.time())
    assert found.records == []
    assert found.read.startswith("not read: journalctl exit 1: Data from the specified boot "
                                 "(-1) is not available"), found.read


def _snapshot(booted: float) -> Snapshot:
    return Snapshot("n1", NOW, host=HostInfo(hostname="n1", boot_time=booted),
                    nvml=NvmlInfo(), kernel_log=KernelLog("kmsg"))


def _kept(root: Path) -> list[dict[str, Any]]:
    found = previous_boot.read(Runner(stdout=journal(FATAL_MEMORY)), root, NOW)
    return boot_records.events_from(found, _snapshot(NOW - 600))


def test_records_are_kept_as_events_only_host_cper_reads(root: Path, tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    events = Events(_kept(root))
    state.save_events(events)
    events = state.load_events()  # a cper event is valid state, not dropped
    assert [e["kind"] for e in events.active()] == [CPER]
    snap = _snapshot(NOW - 600)
    sticky.inject(snap, events)
    boot_records.inject(snap, events, "journalctl -k -b -1: 9 lines")
    assert snap.nvml is not None
    assert snap.nvml.events == []
    assert snap.kernel_log is not None
    assert snap.kernel_log.previous_boot is not None
    (record,) = snap.kernel_log.previous_boot.records
    assert record.id == events.active()[0]["id"]
    assert Snapshot.from_dict(snap.to_dict()) == snap


def test_a_record_stays_until_cleared_or_a_later_reboot(root: Path) -> None:
    events = Events(_kept(root))
    (event,) = events.active()
    assert sticky.resolved(_snapshot(NOW - 600), event) is None  # this boot: it stays
    assert sticky.resolved(_snapshot(NOW - 60), event).startswith("a later reboot")
    events.clear(event["id"], "cleared with clusterdiag agent --clear")
    assert not any(events.add(e) for e in _kept(root))  # read again at a restart: still cleared
    assert events.active() == []


def test_a_snapshot_saved_before_previous_boots_loads() -> None:
    data = Snapshot("n1", NOW, kernel_log=KernelLog("kmsg")).to_dict()
    del data["kernel_log"]["previous_boot"]
    loaded = Snapshot.from_dict(data)
    assert loaded.kernel_log is not None
    assert loaded.kernel_log.previous_boot is None
