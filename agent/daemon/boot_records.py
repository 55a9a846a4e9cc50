"""The previous boot's hardware error records, kept by the agent until they no longer
need anyone.

At its start the agent reads the previous boot's kernel log once
(agent/collectors/previous_boot.py). Each fatal or recoverable APEI/CPER record found
there becomes an event of the agent's state (``events.json``, kind ``cper``), beside the
XIDs: an agent restarted within the same boot reads the same records again under the
same ids, so one the operator cleared (``clusterdiag agent --clear ID`` or ``POST
/v1/clear/ID``, as for a sticky XID) stays cleared. Every judging puts the active ones
into the snapshot's ``kernel_log.previous_boot``, where ``host.cper`` judges them for the
first hours after the boot. A record is resolved by a later reboot: the boot it was
read in ended too, and the next start reads the boot after it.
"""

from __future__ import annotations

from typing import Any

from ...reports.model.node import iso
from ..model import Snapshot
from ..model.kernel import MAX_PREVIOUS_BOOT_RECORDS, BootRecord, KernelEvent, PreviousBoot
from .state import CPER, MAX_MESSAGE_CHARS, Events

# /proc/stat's btime is now less uptime, in whole seconds, and moves with the wall
# clock's adjustments: a boot time this much later is another boot.
_SAME_BOOT_S = 60.0


def events_from(found: PreviousBoot, snap: Snapshot) -> list[dict[str, Any]]:
    """The records ``found`` holds as events of the agent's state, each with the boot
    they were read in (the one after theirs): its start (``booted``), the kernel's id for
    it (``boot_id``, /proc/sys/kernel/random/boot_id: "a random string ... generated
    afresh at each boot", proc(5)) and when it was read (``read_at``, a time within that
    boot, for when neither was known)."""
    booted = snap.boot_time()
    return [{"id": r.id, "kind": CPER, "time": float(r.event.time or 0.0),
             "message": r.event.message[:MAX_MESSAGE_CHARS], "booted": booted,
             "boot_id": snap.boot_id, "read_at": snap.taken_at, "cleared": None}
            for r in found.records]


def inject(snap: Snapshot, events: Events, read: str | None) -> None:
    """The active records, and what the start's read said, into the snapshot's kernel
    log; nothing where the previous boot was never read (``read`` None)."""
    if read is None or snap.kernel_log is None:
        return
    active = events.active_of(CPER)[-MAX_PREVIOUS_BOOT_RECORDS:]
    snap.kernel_log.previous_boot = PreviousBoot(read, [
        BootRecord(str(e["id"]), KernelEvent("cper", str(e["message"]), str(e["message"]),
                                             time=float(e["time"]) or None))
        for e in active])


def resolved(snap: Snapshot, event: dict[str, Any]) -> str | None:
    """Why the record no longer counts (this node booted again after the boot it was
    read in), or None. The boot id tells it surely; the boot times where an id is
    missing; a record whose boot is unknown counts for the boot it was read in only (any
    boot that began after it was read is a later one), and one that does not even say
    when it was read for none."""
    recorded, current = event.get("boot_id"), snap.boot_id
    if isinstance(recorded, str) and current is not None:
        return None if recorded == current else "a later boot seen (another boot id)"
    now = snap.boot_time()
    booted, read_at = event.get("booted"), event.get("read_at")
    if isinstance(booted, (int, float)):
        if now is not None and now > booted + _SAME_BOOT_S:
            return f"a later reboot seen (booted {iso(now)})"
        return None
    if not isinstance(read_at, (int, float)):
        return "the boot it was read in is unknown"
    if now is not None and now > read_at + _SAME_BOOT_S:
        return f"a later reboot seen (booted {iso(now)}, after it was read)"
    return None
