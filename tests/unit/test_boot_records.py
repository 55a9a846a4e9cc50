"""The previous boot's records the agent keeps (agent/daemon/boot_records.py): each
remembers the boot it was read in, and a later boot resolves it, whichever of the boot's
id and start time the snapshots could read."""

from __future__ import annotations

from clusterdiag.agent.daemon import boot_records
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.model.kernel import BootRecord, KernelEvent, PreviousBoot

T = 1_800_000_000.0
FATAL = KernelEvent("cper", "event severity: fatal", "event severity: fatal", time=T - 600)


def _snap(taken_at: float, boot_time: float | None, boot_id: str | None) -> Snapshot:
    return Snapshot("n1", taken_at, host=HostInfo(hostname="n1", boot_time=boot_time),
                    boot_id=boot_id)


def _kept(snap: Snapshot) -> dict[str, object]:
    (event,) = boot_records.events_from(PreviousBoot("read", [BootRecord("cper-1", FATAL)]),
                                        snap)
    return event


def test_a_record_read_without_a_boot_time_is_resolved_by_the_next_boot() -> None:
    event = _kept(_snap(T, None, "boot-a"))
    assert boot_records.resolved(_snap(T + 3600, None, "boot-a"), event) is None
    later = _snap(T + 90_000, T + 80_000, "boot-b")
    assert "later boot" in (boot_records.resolved(later, event) or "")


def test_the_boot_id_outranks_a_boot_time_that_moved_with_the_clock() -> None:
    event = _kept(_snap(T, T - 100, "boot-a"))
    stepped = _snap(T + 3600, T + 3000, "boot-a")  # btime moves with the wall clock
    assert boot_records.resolved(stepped, event) is None


def test_a_record_whose_boot_is_unknown_counts_for_the_boot_it_was_read_in_only() -> None:
    event = _kept(_snap(T, None, None))
    assert boot_records.resolved(_snap(T + 3600, T - 100, None), event) is None
    assert "later reboot" in (boot_records.resolved(_snap(T + 9000, T + 8000, None), event)
                              or "")


def test_a_stored_record_that_names_no_boot_at_all_no_longer_counts() -> None:
    stored = {"id": "cper-1-0", "kind": "cper", "time": 1.0, "message": "event severity: "
              "fatal", "booted": None, "cleared": None}
    assert boot_records.resolved(_snap(2e9, 2e9 - 100, "boot-b"), stored) is not None


def test_a_record_of_a_known_boot_time_is_resolved_by_a_later_one_as_before() -> None:
    event = _kept(_snap(T, T - 100, None))
    assert boot_records.resolved(_snap(T + 10, T - 100, None), event) is None
    assert boot_records.resolved(_snap(T + 9000, T + 8000, None), event) is not None
