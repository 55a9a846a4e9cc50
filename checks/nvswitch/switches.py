"""NVSwitch checks: the board's NVSwitch chips on PCI (nvswitch.count), or on boards whose
NVSwitches are no PCI functions (HGX/DGX B200) the ConnectX-7 functions they are managed
through (nvswitch.management), and their SXid errors in the kernel log (nvswitch.sxid).
NVL72 compute trays have none: their switches are in the switch trays."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Mapping

from ...agent.model.ib import nvswitch_management
from ...agent.model.kernel import SxidEvent
from ...agent.model.pci import unidentified
from ..catalogs.xid_catalog import sxid_info
from ..core.common import NODE
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from ..core.validation import NVSWITCH


@check("nvswitch.count", needs=("pci",),
       remedy="An NVSwitch missing from PCI stops Fabric Manager (\"detected number of "
              "NVSwitches don't match with any supported system topology\"). Power-cycle "
              "the node; a switch that stays missing is a baseboard fault (RMA). More "
              "switches than expected means the profile is wrong for this node.",
       actions=(Action.REBOOT, Action.INVESTIGATE))
def nvswitch_count(ctx: CheckContext) -> Iterator[Finding]:
    """The board's NVSwitches are all on PCI (6 on A100, 4 on H100/H200, 2 on B200).

    Counts NVIDIA PCI devices of class 0x0680 (bridge, other): the NVSwitch class. NVIDIA
    PCI bridges of class 0x0604 on GB200 trays are not switches. NVL72 compute trays
    have no NVSwitch on the tray (the switches are in the switch trays): skipped there.
    """
    profile = ctx.profile
    if profile.nvl72:
        yield Finding.skip(NODE, "NVL72 tray: the NVSwitches are in the switch trays")
        return
    if profile.nvswitch and profile.nvswitch_mgmt_functions:
        yield Finding.skip(NODE, "the NVSwitches are no PCI functions on this board "
                                 "(nvswitch.management counts their managers)")
        return
    if not profile.nvswitch or profile.nvswitch_count is None:
        yield Finding.skip(NODE, "no NVSwitch on this platform")
        return
    pci = ctx.snapshot.pci
    if pci is None:
        stats = ctx.snapshot.sources.get("pci") or ctx.snapshot.sources.get("sysfs")
        yield Finding.error(NODE, "PCI devices were not collected",
                            stats.error or stats.status if stats else None)
        return
    found = sorted(d.bdf for d in pci if d.is_nvswitch)
    want = profile.nvswitch_count
    unread = unidentified(pci)
    if len(found) < want and unread:
        yield Finding.error(NODE, "fewer NVSwitches than expected, but PCI devices could not "
                            "be identified", {"found": len(found), "unidentified": unread})
    elif len(found) < want:
        yield Finding.fail(NODE, "NVSwitches missing from PCI", len(found), want,
                           Action.REBOOT)
    elif len(found) > want:
        yield Finding.warn(NODE, "more NVSwitches on PCI than the profile expects",
                           len(found), want, Action.INVESTIGATE)
    else:
        yield Finding.passed(NODE, "NVSwitch count as expected", len(found), want)


@check("nvswitch.management", needs=("infiniband",),
       remedy="A management function missing from /sys/class/infiniband: is mlx5_ib loaded "
              "(`lsmod`), does `lspci -d 15b3:` list all four functions of the baseboard's "
              "ConnectX-7 bridge? Power-cycle the node; a function that stays missing is a "
              "baseboard fault (RMA). VPD unreadable: run the agent as root (the sysfs vpd "
              "file is root's only).",
       actions=(Action.REBOOT, Action.INVESTIGATE))
def management_functions(ctx: CheckContext) -> Iterator[Finding]:
    """As many RDMA devices with VPD SMDL=SW_MNG as the profile's
    ``nvswitch_mgmt_functions`` (4 on B200: two ports, each a full and a limited function).

    Fewer with some VPD unreadable is an error naming the files, never a missing part;
    more warns (the profile may be wrong for the node).
    """
    want = ctx.profile.nvswitch_mgmt_functions
    if not want:
        yield Finding.skip(NODE, "no NVSwitch management functions on this platform "
                                 "(its NVSwitches, if any, are counted on PCI)")
        return
    devs = ctx.snapshot.infiniband
    if devs is None:
        stats = ctx.snapshot.sources.get("infiniband")
        yield Finding.error(NODE, "RDMA devices were not read",
                            stats.error or stats.status if stats else None)
        return
    found = sorted(d.name for d in devs if nvswitch_management(d))
    unread = {d.name: d.unknown["vpd"] for d in devs if "vpd" in d.unknown}
    observed = {"found": found, "count": len(found)}
    if len(found) < want and unread:
        yield Finding.error(NODE, f"NVSwitch management functions ({len(found)} of {want} "
                                  "found, VPD unread)", unread)
    elif len(found) < want:
        yield Finding.fail(NODE, "NVSwitch management functions missing (VPD SMDL=SW_MNG)",
                           observed, want, Action.REBOOT)
    elif len(found) > want:
        yield Finding.warn(NODE, "more NVSwitch management functions than the profile "
                                 "expects", observed, want, Action.INVESTIGATE)
    else:
        yield Finding.passed(NODE, "NVSwitch management functions as expected", observed, want)


def _event_time(event: SxidEvent, boot_time: float | None) -> float | None:
    """Wall time of the event: its own, or boot time plus its uptime stamp."""
    when: float | None = event.time
    uptime: float | None = event.uptime_s
    if when is None and uptime is not None and boot_time is not None:
        when = boot_time + uptime
    return when


def _continuation(message: str) -> bool:
    """The driver's ``Severity ...`` and ``Data {...}`` lines follow a fault's own line."""
    return message.startswith(("Severity", "Data"))


# A string: compiled on first use through re's cache, not at every prolog's import.
_SEVERITY_FATAL = r"Severity 1\b"


def _fatal(events: list[SxidEvent]) -> bool:
    """Whether the driver called the fault fatal: a ``Fatal, ...`` fault line, or the
    ``Severity 1`` record _nvswitch_dump_error_entry (nvswitch.c) prints for it, 1 being
    NVSWITCH_ERROR_SEVERITY_FATAL (ctrl_dev_nvswitch.h; 0 is NONFATAL). A fault may reach
    us through its Severity/Data records alone."""
    return any(e.message.lower().startswith("fatal") or re.match(_SEVERITY_FATAL, e.message)
               for e in events)


def _switch_component(event: SxidEvent) -> str:
    """``nvidia-nvswitch1`` -> ``nvswitch1``; the bus id when the line named no device."""
    device: str | None = event.switch_device
    bdf: str = event.pci_bdf
    return device.removeprefix("nvidia-") if device else bdf


@parameters
class SxidParams(Params):
    window_s: int = param(7200, ge=0, doc="how far back an SXid counts, in seconds")
    repeat_thresholds: Mapping[int, int] = param(
        {}, ge=1, doc="SXid code -> occurrences before it counts, over the catalog's "
        "repeat_threshold")


@check("nvswitch.sxid", validation=NVSWITCH, needs=("kernel_log",), params=SxidParams,
       remedy="Read the SXid in the Fabric Manager user guide (appendix D) and the FM log "
              "(/var/log/fabricmanager.log). A fatal SXid needs the GPUs and NVSwitches "
              "reset: drain the node and reboot it (20034 LTSSM Fault Up: reset the GPU "
              "on the failing link). A non-fatal SXid that keeps coming is link quality: "
              "open a ticket with the SXid lines.",
       actions=(Action.RESET_GPU, Action.REBOOT, Action.INVESTIGATE))
def sxid(ctx: CheckContext) -> Iterator[Finding]:
    """No NVSwitch SXid errors in the last ``window_s`` seconds (default 2 hours).

    Each SXid code is classified by the catalog (xid_catalog.py, from the Fabric Manager
    user guide); an unknown code warns, or fails when the driver called it ``Fatal``. The
    ``Severity`` and ``Data`` lines the driver prints after a fault are part of that
    fault, not new ones. Events without a time (a log without timestamps) are counted:
    the kernel log only reaches back to boot. One finding per switch and code.
    """
    profile = ctx.profile
    pci = ctx.snapshot.pci or []
    if profile.nvl72 and not profile.nvswitch:
        yield Finding.skip(NODE, "NVL72 tray: SXids are reported on the switch trays")
        return
    if not profile.nvswitch and not any(d.is_nvswitch for d in pci):
        yield Finding.skip(NODE, "no NVSwitch on this platform")
        return
    log = ctx.snapshot.kernel_log
    if log is None:
        stats = ctx.snapshot.sources.get("kernel_log")
        yield Finding.error(NODE, "kernel log was not read",
                            stats.error or stats.status if stats else None)
        return
    if log.unknown and not log.lines_read:
        yield Finding.error(NODE, "kernel log unreadable", dict(log.unknown))
        return
    now = ctx.now or ctx.snapshot.taken_at
    params = SxidParams.of(ctx)
    since = now - params.window_s
    overrides = params.repeat_thresholds
    groups: dict[tuple[str, int], list[SxidEvent]] = defaultdict(list)
    for event in log.sxids:
        when = _event_time(event, log.boot_time)
        if when is not None and when < since:
            continue
        groups[(_switch_component(event), event.sxid)].append(event)
    if not groups:
        yield Finding.passed(NODE, "no NVSwitch SXid errors in the window", 0,
                             f"0 in {params.window_s} s")
        return
    for (component, code), events in sorted(groups.items()):
        faults = [e for e in events if not _continuation(e.message)] or events[:1]
        count = len(faults)
        fatal = _fatal(events)
        info = sxid_info(code)
        observed = {"sxid": code, "count": count, "last": faults[-1].message}
        if info is None:
            text = f"NVSwitch SXid {code} (not in the catalog)"
            if fatal:
                yield Finding.fail(component, text, observed, "no SXid", Action.REBOOT)
            else:
                yield Finding.warn(component, text, observed, "no SXid", Action.INVESTIGATE)
            continue
        text = f"NVSwitch SXid {code} ({info.name})"
        threshold = overrides.get(code, info.repeat_threshold)
        expected = f"< {threshold} in {params.window_s} s"
        action = Action(info.action)
        if count < threshold or info.severity == "info":
            yield Finding.passed(component, f"{text} below its threshold", observed, expected)
        elif info.severity == "fail" or fatal:
            yield Finding.fail(component, text, observed, expected,
                               action if action is not Action.NONE else Action.REBOOT)
        else:
            yield Finding.warn(component, text, observed, expected, action)
