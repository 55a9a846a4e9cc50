"""XID events the agent recorded: into the snapshot, and sticky until their fix is seen.

An XID whose catalog action is a GPU reset or a reboot must not vanish from the report
just because ``gpu.xid``'s time window moved on: the GPU is no better for it. So each
recorded event stays active until a reboot (boot time after the event) or a GPU reset
(a logged reset of that GPU, or a driver load, after the event) is seen, or an operator
clears it (``clusterdiag agent --clear ID`` or ``POST /v1/clear/ID`` with the token).
While ``gpu.xid`` still judges it from its window nothing is added; once it no longer
does, the agent adds the finding itself and says why it is still there.
"""

from __future__ import annotations

from typing import Any

from ...checks.catalogs.xid_catalog import xid_info
from ...checks.core.finding import Action, Finding, Status
from ...reports.model.node import NodeReport, iso
from ..model import Snapshot
from ..model.gpu import NvmlEvent
from . import boot_records
from .state import XID, Events
from .xid import XID_EVENT

STICKY_ACTIONS = ("reset_gpu", "reboot", "rma")


def event_from(message: dict[str, Any]) -> dict[str, Any]:
    """A recorded event from the listener's message. The id names code, GPU and second:
    readable for ``--clear``, and one id for a burst of the same Xid within a second."""
    gpu = message.get("gpu_index")
    code = int(message["xid"])
    when = float(message["time"])
    return {"id": f"xid{code}-gpu{gpu if gpu is not None else 'x'}-{int(when)}", "xid": code,
            "gpu_index": gpu, "gpu_uuid": message.get("gpu_uuid"), "time": when,
            "cleared": None}


def inject(snap: Snapshot, events: Events) -> None:
    """The active events as NVML events of the snapshot, where ``gpu.xid`` reads them."""
    if snap.nvml is None:
        return
    snap.nvml.events.extend(
        NvmlEvent(gpu_index=e.get("gpu_index"), event_type=XID_EVENT, xid=int(e["xid"]),
                  time=float(e["time"])) for e in events.active_of(XID))


def _gpu_ids(snap: Snapshot, index: int | None) -> set[str]:
    for gpu in snap.nvml.gpus if snap.nvml else []:
        if gpu.index == index:
            return {x.lower() for x in (gpu.uuid, gpu.pci_bdf) if x}
    return set()


def resolved(snap: Snapshot, event: dict[str, Any]) -> str | None:
    """Why the event no longer needs action (a reboot or reset seen after it), or None.
    A previous boot's record is past by its own rule (boot_records.py)."""
    if event.get("kind", XID) != XID:
        return boot_records.resolved(snap, event)
    when = float(event["time"])
    boot = snap.boot_time()
    if boot is not None and boot > when:
        return f"reboot seen (booted {iso(boot)})"
    own = _gpu_ids(snap, event.get("gpu_index"))
    for e in snap.kernel_log.events if snap.kernel_log else []:
        if e.kind != "gpu_reset" or e.time is None or e.time <= when:
            continue
        if e.device is None or e.device.lower() in own:
            return f"GPU reset seen ({iso(e.time)})"
    return None


def add_sticky(report: NodeReport, events: Events) -> None:
    """Findings for active events that need action and that ``gpu.xid`` no longer fails."""
    judged = {f.component for f in report.findings
              if f.check == "gpu.xid" and f.status in (Status.FAIL, Status.WARN)}
    extra: list[Finding] = []
    for e in events.active_of(XID):
        info = xid_info(int(e["xid"]))
        if info is None or info.action not in STICKY_ACTIONS:
            continue
        comp = f"gpu{e['gpu_index']}" if e.get("gpu_index") is not None else "node"
        if comp in judged:
            continue
        extra.append(Finding(
            Status.FAIL, comp, f"Xid {info.code} ({info.name}) still needs {info.action}",
            observed={"event": e["id"], "seen_at": iso(float(e["time"])),
                      "still_here_because": "no reboot or reset of this GPU seen since, and "
                                            "not cleared",
                      "clear_with": f"clusterdiag agent --clear {e['id']}"},
            expected="a GPU reset or reboot after the event", action=Action(info.action),
            check="gpu.xid"))
        judged.add(comp)
    if extra:
        passes = {f.component for f in extra}
        report.findings = [f for f in report.findings
                           if not (f.check == "gpu.xid" and f.component in passes
                                   and f.status is Status.PASS)] + extra
        report.findings.sort(key=lambda f: (-f.status.rank, f.check, f.component))

