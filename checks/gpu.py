"""GPU checks: presence, identity, Xids, thermals, clocks, power, PCIe, modes and leftovers.

Each check judges what the NVML, PCI and kernel-log collectors put in the snapshot and
nothing else. A value NVML does not support on a part (``gpu.unsupported``: NotSupported,
FunctionNotFound, NoPermission...) is a ``skip`` with the reason, never a fail; a GPU that
does not answer is judged once, by ``gpu.responsive``, and skipped by the others. The
memory-health checks (ECC, retired pages, row remapping, recovery action) live in
``gpu_memory``, listed beside this module in ``checks/__init__.py``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..agent.model import Snapshot
from ..agent.model.gpu import Gpu, NvmlInfo
from ..agent.model.kernel import KernelLog
from ..agent.model.pci import PciDevice, unidentified
from .finding import Action, Finding, Status
from .rates import DEFAULT_MIN_EVENTS, counter_rate, sample_interval
from .registry import CheckContext, check
from .xid_catalog import NVLINK5, XID_CATALOG, XidInfo, xid_info

NODE = "node"
GIB = 1 << 30
FIELDS = "fields"  # the collector's key when the whole field-value batch failed

# --- shared helpers (also used by gpu_memory) -----------------------------------------


def component(gpu: Gpu) -> str:
    return f"gpu{gpu.index}"


def error_finding(comp: str, message: str, reason: Any) -> Finding:
    """The check could not tell: NVML failed in a way that is not "not supported"."""
    return Finding(Status.ERROR, comp, message, observed=reason, action=Action.INVESTIGATE)


def skip_finding(comp: str, message: str, observed: Any = None) -> Finding:
    return Finding(Status.SKIP, comp, message, observed=observed)


def answering_gpus(ctx: CheckContext) -> tuple[list[Gpu], list[Finding]]:
    """The GPUs a per-GPU check can judge, and the skips for everything else.

    No NVML, a library error, or a GPU that is lost: ``gpu.responsive`` judges those, so
    the other checks skip instead of failing the same fault again. The second list is
    never empty when the first is.
    """
    nvml = ctx.snapshot.nvml
    if nvml is None:
        return [], [skip_finding(NODE, "NVML was not read (see gpu.responsive)")]
    if nvml.library_error:
        return [], [skip_finding(NODE, "NVML unavailable (see gpu.responsive)",
                                 nvml.library_error)]
    if "init" in nvml.errors:
        return [], [skip_finding(NODE, "NVML did not initialise (see gpu.responsive)",
                                 nvml.errors["init"])]
    gpus: list[Gpu] = []
    skips: list[Finding] = []
    for gpu in nvml.gpus:
        if gpu.lost or gpu.index in nvml.unanswered:
            skips.append(skip_finding(component(gpu), "GPU not answering (see gpu.responsive)",
                                      gpu.lost or "timeout"))
        elif "handle" in gpu.errors or "handle" in gpu.unsupported:
            skips.append(skip_finding(component(gpu), "GPU could not be opened "
                                      "(see gpu.responsive)",
                                      gpu.errors.get("handle") or gpu.unsupported.get("handle")))
        else:
            gpus.append(gpu)
    if not gpus and not skips:
        skips.append(skip_finding(NODE, "NVML enumerates no GPU"))
    return gpus, skips


def missing(gpu: Gpu, what: str, *keys: str) -> Finding:
    """Why a value is None, as a skip: not supported here, an NVML error (which
    ``gpu.responsive`` fails, so it is not failed twice), or simply not reported."""
    comp = component(gpu)
    for key in keys:
        if key in gpu.unsupported:
            return skip_finding(comp, f"{what} not supported on this GPU or driver",
                                gpu.unsupported[key])
    for key in keys:
        if key in gpu.errors:
            return skip_finding(comp, f"{what} could not be read (see gpu.responsive)",
                                gpu.errors[key])
    return skip_finding(comp, f"{what} not reported")


def norm_bdf(bdf: str | None) -> str | None:
    """``00000000:3B:00.0``, ``0000:3b:00`` or ``3b:00.0`` -> ``0000:3b:00``.

    Domain, bus and device only: GPUs are function 0, Xid lines omit the function, and
    NVML prints an 8-digit upper-case domain where sysfs has 4 lower-case digits
    (hardware.md §1.3, §5.1).
    """
    if not bdf:
        return None
    parts = bdf.strip().split(".")[0].split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return None
    try:
        domain, bus, dev = (int(p, 16) for p in parts)
    except ValueError:
        return None
    return f"{domain:04x}:{bus:02x}:{dev:02x}"


def previous_gpu(ctx: CheckContext, gpu: Gpu) -> Gpu | None:
    """The same GPU in ``ctx.previous``: by UUID (indices may change), else by index."""
    prev = ctx.previous.nvml if ctx.previous is not None else None
    if prev is None:
        return None
    for old in prev.gpus:
        if gpu.uuid and old.uuid == gpu.uuid:
            return old
    for old in prev.gpus:
        if not gpu.uuid and old.index == gpu.index:
            return old
    return None


def nvml_usable(nvml: NvmlInfo | None) -> bool:
    return nvml is not None and not nvml.library_error and "init" not in nvml.errors


# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (230) values (hardware.md §1.5; 6 and 7 from pynvml
# 13.615): status, message, action. Shared with gpu.xid, which reads Xid 154's new value.
RECOVERY_ACTIONS: dict[int, tuple[Status, str, Action]] = {
    0: (Status.PASS, "no recovery action required", Action.NONE),
    1: (Status.FAIL, "driver requires a GPU reset", Action.RESET_GPU),
    2: (Status.FAIL, "driver requires a node reboot", Action.REBOOT),
    3: (Status.FAIL, "driver requires draining peer-to-peer traffic", Action.DRAIN),
    4: (Status.FAIL, "driver requires draining, then a GPU reset", Action.RESET_GPU),
    5: (Status.FAIL, "driver requires recovering the IMEX domain", Action.INVESTIGATE),
    6: (Status.FAIL, "driver requires a PCIe bus reset", Action.REBOOT),
    7: (Status.FAIL, "driver requires a system reboot", Action.REBOOT),
}
RECOVERY_NAMES = {0: "NONE", 1: "GPU_RESET", 2: "NODE_REBOOT", 3: "DRAIN_P2P",
                  4: "DRAIN_AND_RESET", 5: "RECOVER_IMEX_DOMAIN", 6: "BUS_RESET",
                  7: "SYSTEM_REBOOT"}


def recovery_finding(comp: str, value: int, source: str) -> Finding:
    status, message, action = RECOVERY_ACTIONS.get(
        value, (Status.WARN, "unknown recovery action requested", Action.INVESTIGATE))
    observed = {"recovery_action": value, "name": RECOVERY_NAMES.get(value), "from": source}
    return Finding(status, comp, message, observed, "NONE", action)


# --- gpu.responsive --------------------------------------------------------------------

_LIBRARY_HINTS = {
    "LibraryNotFound": "libnvidia-ml.so.1 not found",
    "DriverNotLoaded": "NVIDIA kernel module not loaded",
    "LibRmVersionMismatch": "driver library and kernel module versions differ",
}


@check("gpu.responsive", needs=("nvml", "pci"),
       remedy="A GPU that fell off the bus (GpuIsLost, Xid 79) or does not answer NVML "
              "needs a node reboot; ResetRequired needs `nvidia-smi -r -i N` (no processes "
              "on it) or a reboot. GPUs on PCI with no working driver: reinstall or reload "
              "the driver (a library/kernel-module version mismatch after an upgrade needs "
              "a reboot). If it comes back after a reboot, repeat offenders go to RMA.",
       actions=(Action.REBOOT, Action.RESET_GPU, Action.FIX_CONFIG, Action.INVESTIGATE))
def responsive(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU answers NVML, and the driver answers at all where PCI shows GPUs.

    A GPU that does not answer within the deadline is a fail, never a hang (DESIGN.md §1),
    unless the miss was our own deadline (a starved or budget-less reader, see
    agent/collectors/nvml_budget.py): that is an error naming the budget, never a reboot.
    With no working NVML, PCI decides: GPUs there mean the driver is broken (fail),
    none means this is not a GPU node (skip).
    """
    snap = ctx.snapshot
    nvml = snap.nvml
    pci_gpus = [d for d in snap.pci or [] if d.is_nvidia_gpu]
    if nvml is None or nvml.library_error:
        error = nvml.library_error if nvml is not None else "not collected"
        observed: dict[str, Any] = {"error": error,
                                    "message": nvml.library_message if nvml else None}
        if error == "NoPermission":
            yield error_finding(NODE, "no permission to use NVML", observed)
        elif pci_gpus:
            observed["pci_gpus"] = [d.bdf for d in pci_gpus]
            if error == "LibraryNotFound":
                yield Finding.fail(NODE, "NVIDIA GPUs on PCI but no NVIDIA driver library",
                                   observed, "libnvidia-ml.so.1", Action.FIX_CONFIG)
            else:
                yield Finding.fail(NODE, "NVIDIA GPUs on PCI but the driver does not answer",
                                   observed, "NVML initialised", Action.REBOOT)
        elif snap.pci is None:
            yield error_finding(NODE, "NVML unavailable and PCI not read: cannot tell "
                                      "whether GPUs are present", observed)
        else:
            hint = _LIBRARY_HINTS.get(str(error), str(error))
            yield skip_finding(NODE, f"no NVIDIA GPU on this node (PCI) and no driver ({hint})",
                               observed)
        return
    if "deadline" in nvml.errors:
        yield error_finding(NODE, "NVML not judged: no answer within clusterdiag's own budget",
                            nvml.errors["deadline"])
        return
    if "init" in nvml.errors:
        yield Finding.fail(NODE, "NVML did not initialise within the deadline",
                           nvml.errors["init"], "NVML answers", Action.REBOOT)
        return
    if "worker" in nvml.errors:
        yield error_finding(NODE, "NVML reader crashed", nvml.errors["worker"])
    if "device_count" in nvml.errors:
        yield Finding.fail(NODE, "NVML could not count the GPUs", nvml.errors["device_count"],
                           "a GPU count", Action.REBOOT)
    seen: set[int] = set()
    for gpu in nvml.gpus:
        seen.add(gpu.index)
        yield _responsive_gpu(gpu, gpu.index in nvml.unanswered)
    for index in sorted(set(nvml.unanswered) - seen):
        yield Finding.fail(f"gpu{index}", "GPU did not answer NVML within the deadline",
                           "timeout", "an answer", Action.REBOOT)
    if not seen and not nvml.unanswered:
        yield skip_finding(NODE, "NVML enumerates no GPU (see gpu.count)",
                           {"device_count": nvml.device_count})


def _responsive_gpu(gpu: Gpu, unanswered: bool) -> Finding:
    comp = component(gpu)
    if gpu.lost == "GpuIsLost":
        return Finding.fail(comp, "GPU has fallen off the bus (GpuIsLost)", gpu.lost,
                            "answers NVML", Action.REBOOT)
    if gpu.lost == "ResetRequired":
        return Finding.fail(comp, "GPU requires a reset (ResetRequired)", gpu.lost,
                            "answers NVML", Action.RESET_GPU)
    if (unanswered or gpu.lost == "timeout") and "deadline" in gpu.errors:
        return error_finding(comp, "GPU not judged: no answer within clusterdiag's own budget",
                             gpu.errors["deadline"])
    if unanswered or gpu.lost == "timeout":
        return Finding.fail(comp, "GPU did not answer NVML within the deadline", "timeout",
                            "an answer", Action.REBOOT)
    if gpu.lost:
        return Finding.fail(comp, "GPU not answering NVML", gpu.lost, "answers NVML",
                            Action.REBOOT)
    if "handle" in gpu.unsupported:
        return skip_finding(comp, "GPU not accessible to clusterdiag", gpu.unsupported["handle"])
    if "handle" in gpu.errors:
        reason = gpu.errors["handle"]
        if reason.startswith("InsufficientPower"):
            return Finding.fail(comp, "GPU reports insufficient power (check power cables)",
                                reason, "answers NVML", Action.INVESTIGATE)
        return Finding.fail(comp, "GPU could not be opened by NVML", reason, "answers NVML",
                            Action.REBOOT)
    errors = {k: v for k, v in gpu.errors.items() if not k.startswith(_OTHER_FAMILIES)}
    if errors:
        # Any failure other than "not supported" (Unknown, Timeout, ...) on a GPU that
        # still has a handle: the driver and the GPU disagree; the per-value checks skip.
        return Finding.fail(comp, "NVML calls fail on this GPU", errors, "no NVML errors",
                            Action.REBOOT)
    return Finding.passed(comp, "GPU answers NVML")


# Read errors the nvlink and fabric families judge (per-link fields, fabric info).
_OTHER_FAMILIES = ("nvlink", "fabric", "platform")


# --- gpu.count, gpu.model ------------------------------------------------------------


@check("gpu.count", needs=("nvml", "pci"),
       remedy="A GPU missing from NVML but present on PCI is usually wedged: reboot. One "
              "missing from PCI too has fallen off the bus or lost power/seating: reboot, "
              "then have it inspected. More GPUs than expected means the node has the "
              "wrong profile.",
       actions=(Action.REBOOT, Action.FIX_CONFIG))
def count(ctx: CheckContext) -> Iterator[Finding]:
    """The profile's GPU count, the NVIDIA GPUs on PCI and the GPUs NVML enumerates agree.

    PCI (sysfs) is the ground truth a driver cannot hide; a bus id present there but not
    in NVML names the GPU the driver lost.
    """
    snap, expected = ctx.snapshot, ctx.profile.gpu_count
    nvml = snap.nvml
    pci = None if snap.pci is None else [d for d in snap.pci if d.is_nvidia_gpu]
    usable = nvml_usable(nvml)
    nvml_count = None
    if usable and nvml is not None:
        nvml_count = nvml.device_count if nvml.device_count is not None else len(nvml.gpus)
    observed = {"pci": None if pci is None else len(pci), "nvml": nvml_count}
    if pci is None and nvml_count is None:
        yield error_finding(NODE, "neither PCI nor NVML could count the GPUs", observed)
        return
    if not pci and not nvml_count and not expected:
        yield skip_finding(NODE, "no NVIDIA GPU on this node", observed)
        return
    problems = 0
    if pci is not None and nvml_count is not None and nvml is not None:
        problems += yield from _missing_from_nvml(pci, nvml, nvml_count)
    seen = len(pci) if pci is not None else nvml_count
    unread = unidentified(snap.pci)
    if expected is not None and seen is not None:
        if seen < expected and unread:
            problems += 1
            yield error_finding(NODE, "fewer GPUs than expected, but PCI devices could not be "
                                "identified", {**observed, "unidentified": unread})
        elif seen < expected:
            problems += 1
            yield Finding.fail(NODE, "fewer GPUs than the profile expects", observed, expected,
                               Action.REBOOT)
        elif seen > expected:
            problems += 1
            yield Finding.warn(NODE, "more GPUs than the profile expects", observed, expected,
                               Action.FIX_CONFIG)
    if problems:
        return
    if expected is None:
        yield skip_finding(NODE, "no GPU count in the profile (PCI and NVML agree)", observed)
    else:
        yield Finding.passed(NODE, "GPU count as expected", observed, expected)


def _missing_from_nvml(pci: list[PciDevice], nvml: NvmlInfo,
                       nvml_count: int) -> Generator[Finding, None, int]:
    """Fail per PCI GPU that NVML does not enumerate; the generator returns the count."""
    bus_ids = [norm_bdf(g.pci_bdf) for g in nvml.gpus]
    found = 0
    if bus_ids and all(bus_ids) and len(bus_ids) >= nvml_count:
        for dev in pci:
            if norm_bdf(dev.bdf) not in bus_ids:
                found += 1
                yield Finding.fail(NODE, "GPU on PCI but not enumerated by NVML",
                                   {"bus_id": dev.bdf, "driver": dev.driver},
                                   "enumerated by NVML", Action.REBOOT)
    elif nvml_count < len(pci):
        found += 1
        yield Finding.fail(NODE, "fewer GPUs in NVML than on PCI",
                           {"pci": [d.bdf for d in pci], "nvml": nvml_count}, len(pci),
                           Action.REBOOT)
    return found


@check("gpu.model", needs=("nvml",),
       remedy="The node has GPUs of another model than its profile: fix the profile or "
              "the node's partition/config, or have the node checked if a board was swapped.",
       actions=(Action.FIX_CONFIG,))
def model(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU is one of the profile's models (exact NVML names)."""
    wanted = ctx.profile.gpu_models
    if not wanted:
        yield skip_finding(NODE, "profile names no GPU model")
        return
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        if gpu.name is None:
            yield missing(gpu, "GPU name", "name")
        elif gpu.name in wanted:
            yield Finding.passed(component(gpu), "GPU model as expected", gpu.name, list(wanted))
        else:
            yield Finding.fail(component(gpu), "GPU model not in the profile", gpu.name,
                               list(wanted), Action.FIX_CONFIG)


# --- gpu.xid -------------------------------------------------------------------------

# The severity word of a 144-150 line ("NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (...)",
# hardware.md §5.1; gpud's RegexNVRMXidExtended reads the same token).
_NVLINK5_SEVERITY = re.compile(r"\b(Nonfatal|Non-fatal|Fatal)\b")
_NEW_RECOVERY = re.compile(r"\bto (0x[0-9a-fA-F]+|\d+)")

# Every action the catalog, a Fatal NVLink5 line or an Xid 154 recovery value can ask for.
_XID_ACTIONS = tuple(sorted(
    ({Action(i.action) for i in XID_CATALOG.values()}
     | {a for _, _, a in RECOVERY_ACTIONS.values()} | {Action.INVESTIGATE, Action.RESET_GPU})
    - {Action.NONE}, key=lambda a: a.value))


@dataclass(frozen=True)
class _Event:
    code: int
    time: float | None
    uptime: float | None
    pid: int | None
    message: str
    source: str = "log"


@check("gpu.xid", needs=("kernel_log", "nvml"),
       params={
           # AzNHC greps syslog over a 2 h window (peers.md §1a "XID source").
           "window_s": 7200,
           # One fault prints a burst of identical lines (16 Xid 13 lines in 2 ms in gpud's
           # dmesg.decode.iso.log; Xid 119 repeats every 6 s while nvidia-smi waits on GSP):
           # lines of one code closer than this are one occurrence.
           "burst_s": 60,
           # Code -> occurrences before it counts, over the catalog's repeat_threshold
           # (gpud's --xid-thresholds; users ask for per-Xid tuning, peers.md §4.8).
           "repeat_thresholds": {},
           # Codes never judged (k8s-device-plugin's DP_DISABLE_HEALTHCHECKS list).
           "ignore": [],
       },
       remedy="Act on NVIDIA's immediate action for the code (its Xid Catalog, "
              "checks/xid_catalog.tsv): RESET_GPU / WORKFLOW_XID_48 / WORKFLOW_NVLINK_ERR: "
              "reset the GPU (`nvidia-smi -r -i N`, no processes on it) and check ECC, row "
              "remapping and NVLink state after it; RESTART_BM / RESTART_VM: reboot the "
              "node; CHECK_MECHANICALS (Xid 54): connect or reseat the GPU board's auxiliary "
              "power cable; a Fatal NVLink5 Xid (144-150): reset the GPU, then check the "
              "link's peer and cable; Xid 154: do what the new recovery action says. A GPU "
              "that repeats the same Xid after a reset goes to RMA. RESTART_APP codes point "
              "at the job and only warn when one GPU produces them across jobs.",
       actions=_XID_ACTIONS)
def xid(ctx: CheckContext) -> Iterator[Finding]:
    """Recent Xid errors per GPU, classified by code; older ones are only mentioned.

    Only Xids inside ``window_s`` and after the GPU's last reset (a driver load or a
    logged reset) and the last boot count; a line with no time counts as recent. A burst
    of lines is one occurrence, and application Xids count distinct jobs (pids): they
    never fail, and warn when one GPU produces them across ``repeat_threshold`` jobs.
    Verdicts follow NVIDIA's Xid Catalog (xid_catalog.py): a code whose immediate action
    is a reset, a reboot or a mechanical check fails on one occurrence; 144-150 fail on a
    ``Fatal`` line and count a ``Nonfatal`` one; 154 is judged by the recovery action it
    reports. When another check already fails the Xid's consequence from current state
    (79 on a lost GPU, 48 with volatile uncorrected ECC, 63/64 with a pending or failed
    remap), this one notes the Xid instead of failing it twice. The recovery-action field
    (230) never cancels an Xid's verdict: gpu.recovery_action adds its own.
    """
    snap = ctx.snapshot
    log, nvml = snap.kernel_log, snap.nvml
    nvml_events = [e for e in (nvml.events if nvml else []) if e.xid is not None]
    if log is None and not nvml_events:
        yield skip_finding(NODE, "kernel log not collected: Xid history unknown")
        return
    if log is not None and not log.xids and not log.lines_read and log.unknown \
            and not nvml_events:
        yield skip_finding(NODE, "kernel log unreadable: Xid history unknown", dict(log.unknown))
        return
    gpus = nvml.gpus if nvml else []
    by_bdf = _gpus_by_bus_id(snap, gpus)
    by_index = {g.index: g for g in gpus}
    events: dict[str, list[_Event]] = {}  # "gpu3", or a bus id no NVML GPU has
    for x in log.xids if log else []:
        key = _gpu_key(by_bdf.get(norm_bdf(x.pci_bdf) or ""), x.pci_bdf)
        events.setdefault(key, []).append(_Event(x.xid, x.time, x.uptime_s, x.pid, x.message))
    burst_s = float(ctx.params["burst_s"])
    for n in nvml_events:  # the same Xid the log has: counted once, from the log
        gpu = by_index.get(n.gpu_index) if n.gpu_index is not None else None
        key = _gpu_key(gpu, None)
        same = [e for e in events.get(key, []) if e.code == n.xid and e.source == "log"
                and (e.time is None or n.time is None or abs(e.time - n.time) <= burst_s)]
        if n.xid is not None and not same:
            events.setdefault(key, []).append(
                _Event(n.xid, n.time, None, None, "NVML event", source="nvml"))
    now = ctx.now or snap.taken_at
    unanswered = set(nvml.unanswered) if nvml else set()
    for key in sorted(events, key=_key_order):
        gpu = by_index.get(int(key[3:])) if key.startswith("gpu") else None
        resets = _resets(log, gpu, key)
        recent: list[_Event] = []
        history: Counter[int] = Counter()
        for ev in events[key]:
            if _is_recent(ev, now, float(ctx.params["window_s"]), resets, log):
                recent.append(ev)
            else:
                history[ev.code] += 1
        comp = key if gpu is not None else NODE
        lost = gpu is not None and (bool(gpu.lost) or gpu.index in unanswered)
        state = gpu if gpu is not None and nvml_usable(nvml) else None
        yield from _judge(ctx.params, comp, key, state, lost, recent)
        if history:
            yield Finding.passed(
                comp, "older Xid errors outside the window or before the last reset",
                {"gpu": key, "history": dict(sorted(history.items()))})
    for gpu in gpus:
        if component(gpu) not in events:
            yield Finding.passed(component(gpu), "no Xid errors in the kernel log")
    if not events and not gpus:
        yield Finding.passed(NODE, "no Xid errors in the kernel log")


def _gpus_by_bus_id(snap: Snapshot, gpus: list[Gpu]) -> dict[str, Gpu]:
    """NVML GPUs by bus id. A GPU that was lost before NVML gave its bus id is matched
    to the one PCI GPU no NVML GPU claims, when there is exactly one of each."""
    by_bdf = {b: g for g in gpus if (b := norm_bdf(g.pci_bdf))}
    orphans = [g for g in gpus if not g.pci_bdf]
    unclaimed = [b for d in snap.pci or [] if d.is_nvidia_gpu
                 and (b := norm_bdf(d.bdf)) and b not in by_bdf]
    if len(orphans) == 1 and len(unclaimed) == 1:
        by_bdf[unclaimed[0]] = orphans[0]
    return by_bdf


def _gpu_key(gpu: Gpu | None, bdf: str | None) -> str:
    if gpu is not None:
        return component(gpu)
    return norm_bdf(bdf) or "unknown"


def _key_order(key: str) -> tuple[int, str]:
    return (int(key[3:]), "") if key.startswith("gpu") and key[3:].isdigit() else (1 << 30, key)


def _resets(log: KernelLog | None, gpu: Gpu | None,
            key: str) -> list[tuple[float | None, float | None]]:
    """(time, uptime) of every logged reset that applies to this GPU.

    A driver load (no device) resets every GPU; NVSentinel's acknowledgement names a UUID.
    """
    own = {norm_bdf(gpu.pci_bdf) if gpu else None, norm_bdf(key)} - {None}
    found: list[tuple[float | None, float | None]] = []
    for e in log.events if log else []:
        if e.kind != "gpu_reset":
            continue
        dev = e.device
        if (dev is None or (gpu is not None and dev == gpu.uuid)
                or (not dev.startswith("GPU-") and norm_bdf(dev) in own)):
            found.append((e.time, e.uptime_s))
    return found


def _is_recent(ev: _Event, now: float, window_s: float,
               resets: list[tuple[float | None, float | None]], log: KernelLog | None) -> bool:
    if ev.time is not None:
        if log is not None and log.boot_time is not None and ev.time < log.boot_time:
            return False  # before this boot: the reboot cleared it
        if now - ev.time > window_s:
            return False
    for r_time, r_uptime in resets:
        if ev.time is not None and r_time is not None:
            if r_time >= ev.time:
                return False
        elif ev.uptime is not None and r_uptime is not None and r_uptime >= ev.uptime:
            return False
    return True  # a line that cannot be placed in time counts as recent


def _occurrences(events: list[_Event], application: bool, burst_s: float) -> int:
    """Bursts of lines (closer than ``burst_s``); for application Xids, distinct jobs."""
    if application:
        pids = {e.pid for e in events if e.pid is not None}
        unattributed = [e for e in events if e.pid is None]
        return len(pids) + _bursts(unattributed, burst_s)
    return _bursts(events, burst_s)


def _bursts(events: list[_Event], burst_s: float) -> int:
    stamps = sorted(s for e in events if (s := e.time if e.time is not None else e.uptime)
                    is not None)
    bursts = 0
    last: float | None = None
    for s in stamps:
        if last is None or s - last > burst_s:
            bursts += 1
        last = s
    if len(stamps) < len(events) and not stamps:
        bursts += 1  # lines with no time at all: one occurrence, we cannot tell more
    return bursts


def _threshold(params: Mapping[str, Any], code: int, info: XidInfo | None) -> int:
    custom = params.get("repeat_thresholds") or {}
    value = custom.get(code, custom.get(str(code)))
    if value is not None:
        return max(1, int(value))
    return info.repeat_threshold if info is not None else 1


def _judge(params: Mapping[str, Any], comp: str, key: str, gpu: Gpu | None, lost: bool,
           recent: list[_Event]) -> Iterator[Finding]:
    """Findings for one GPU's recent Xids, one per code. ``gpu`` is None when NVML gives
    no current state for it (not enumerated, or NVML unusable)."""
    ignore = {int(c) for c in params.get("ignore") or []}
    by_code: dict[int, list[_Event]] = {}
    for ev in recent:
        by_code.setdefault(ev.code, []).append(ev)
    for code in sorted(by_code):
        evs = by_code[code]
        info = xid_info(code)
        name = info.name if info else "unknown"
        fatal = [e for e in evs if nvlink5_severity(code, e.message) == "Fatal"]
        occ = _occurrences(evs, bool(info and info.application), float(params["burst_s"]))
        limit = _threshold(params, code, info)
        observed: dict[str, Any] = {"gpu": key, "xid": code, "name": name, "lines": len(evs),
                                    "occurrences": occ, "last": evs[-1].message[:160]}
        if info is not None and info.immediate:
            observed["nvidia_action"] = info.immediate
        pids = sorted({e.pid for e in evs if e.pid is not None})
        if pids:
            observed["pids"] = pids[:10]
        expected = f"< {limit} occurrences"
        owner = _owner(code, gpu, lost)
        if code in ignore:
            yield Finding.passed(comp, f"Xid {code} ignored by configuration", observed)
        elif owner is not None:
            yield Finding.passed(comp, f"Xid {code} ({name}) seen; {owner} judges the "
                                 "current state", observed)
        elif code == 154:
            yield _recovery_changed(comp, evs, observed)
        elif info is None:
            yield Finding.warn(comp, f"Xid {code} not in the catalog", observed, None,
                               Action.INVESTIGATE)
        elif fatal:  # NVLink5 decode (hardware.md §5.2): a Fatal line needs a GPU reset
            observed["last"] = fatal[-1].message[:160]
            yield Finding.fail(comp, f"Xid {code} ({name}) Fatal", observed,
                               "no Fatal NVLink5 error since the last GPU reset",
                               Action.RESET_GPU)
        else:
            yield _by_catalog(comp, info, occ, limit, observed, expected)


def nvlink5_severity(code: int, message: str) -> str | None:
    """``Fatal`` or ``Nonfatal`` for a 144-150 line that says which; None otherwise."""
    if code not in NVLINK5:
        return None
    m = _NVLINK5_SEVERITY.search(message)
    if m is None:
        return None
    return "Fatal" if m[1] == "Fatal" else "Nonfatal"


def _recovery_changed(comp: str, evs: list[_Event], observed: dict[str, Any]) -> Finding:
    """Xid 154 is judged by the recovery action its last line reports ("... changed from
    0x0 (None) to 0x4 (Drain and Reset)"); NVML field 230, judged by gpu.recovery_action,
    can add to it and never cancels it."""
    value = _new_recovery(evs[-1].message)
    if value is None:
        return Finding.warn(comp, "Xid 154 (GPU_RECOVERY_ACTION_CHANGED) without a readable "
                                  "recovery action", observed, "0xN in the line",
                            Action.INVESTIGATE)
    return recovery_finding(comp, value, f"Xid 154: {evs[-1].message[:120]}")


def _by_catalog(comp: str, info: XidInfo, occ: int, limit: int,
                observed: Any, expected: str) -> Finding:
    severity, action = info.severity, Action(info.action)
    message = f"Xid {info.code} ({info.name})"
    if severity == "info":
        return Finding.passed(comp, f"{message}: informational", observed)
    if info.application:
        if occ >= limit:
            return Finding.warn(comp, f"{message} repeated across jobs", observed, expected,
                                action)
        return Finding.passed(comp, f"{message}: application error, not the GPU", observed,
                              expected)
    if severity == "fail":
        if occ >= limit:
            return Finding.fail(comp, message, observed, expected, action)
        return Finding.warn(comp, f"{message} below its repeat threshold", observed, expected,
                            action)
    if occ >= limit:
        return Finding.warn(comp, message, observed, expected, action)
    return Finding.passed(comp, f"{message} below its repeat threshold", observed, expected)


def _owner(code: int, gpu: Gpu | None, lost: bool) -> str | None:
    """The check that already fails this Xid's consequence from current state.

    Only where that check's verdict is at least as strong as the Xid's: a lost GPU
    (gpu.responsive reboots it), uncorrectable ECC still counted (gpu.ecc_uncorrected
    resets it), a pending or failed remap. The recovery-action field is not an owner:
    it may read 0 after a Fatal NVLink5 line or an Xid 154 and must not cancel them.
    """
    if gpu is None:
        return None  # no current state for this GPU: the Xid is the only evidence
    if lost:
        return "gpu.responsive"  # it fails the GPU; every Xid of it is history
    if code in (48, 171, 172) and (gpu.ecc_volatile_uncorrected or 0) > 0:
        return "gpu.ecc_uncorrected"
    if code in (63, 64) and (gpu.remap_pending or gpu.remap_failure):
        return "gpu.row_remap"
    if code in (63, 64) and gpu.retired_pending:
        return "gpu.retired_pages"
    return None


def _new_recovery(message: str) -> int | None:
    m = _NEW_RECOVERY.search(message)
    return int(m[1], 0) if m else None


# --- gpu.temperature, gpu.clock_events, gpu.power_limit --------------------------------


@check("gpu.temperature", needs=("nvml",),
       params={
           # gpud's slowdown-margin threshold is off by default; 5 °C leaves room for the
           # rise from idle to load before the GPU would start to slow itself down.
           "min_slowdown_margin_c": 5,
           # HBM2e/HBM3 "Memory Max Operating Temp: 95 C" in nvidia-smi -q on A100/H100;
           # gpud and DCGM compare HBM temperature with that limit.
           "max_memory_c": 95,
       },
       remedy="Check the node's cooling: fans and fan policy in the BMC, airflow and "
              "blanking panels, inlet temperature, liquid-cooling flow on DLC systems.",
       actions=(Action.INVESTIGATE,))
def temperature(ctx: CheckContext) -> Iterator[Finding]:
    """Margin between GPU temperature and its slowdown threshold; HBM temperature.

    At or over the slowdown temperature the GPU halves its clocks (fail); a margin under
    ``min_slowdown_margin_c`` warns. Memory at ``max_memory_c`` or above warns.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    min_margin, max_mem = ctx.params["min_slowdown_margin_c"], ctx.params["max_memory_c"]
    for gpu in gpus:
        comp, temp, slow = component(gpu), gpu.temperature_c, gpu.slowdown_temperature_c
        if temp is None:
            yield missing(gpu, "GPU temperature", "temperature")
        elif slow is None:
            yield missing(gpu, "slowdown temperature threshold", "slowdown_temperature")
        else:
            observed = {"temperature_c": temp, "slowdown_c": slow, "margin_c": slow - temp}
            if temp >= slow:
                yield Finding.fail(comp, "GPU at or over its slowdown temperature", observed,
                                   f"< {slow} C", Action.INVESTIGATE)
            elif slow - temp < min_margin:
                yield Finding.warn(comp, "GPU close to its slowdown temperature", observed,
                                   f"margin >= {min_margin} C", Action.INVESTIGATE)
            else:
                yield Finding.passed(comp, "GPU temperature within limits", observed,
                                     f"margin >= {min_margin} C")
        mem = gpu.memory_temperature_c
        if mem is not None and max_mem is not None:
            if mem >= max_mem:
                yield Finding.warn(comp, "GPU memory (HBM) at its maximum temperature", mem,
                                   f"< {max_mem} C", Action.INVESTIGATE)
            else:
                yield Finding.passed(comp, "GPU memory temperature within limits", mem,
                                     f"< {max_mem} C")


# nvmlClocksEventReason* bits (hardware.md §1.7).
CLOCK_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap",
                 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                 0x100: "display_clocks", 0x200: "board_limit", 0x400: "reliability"}
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, POWER_BRAKE = 0x8, 0x20, 0x40, 0x80


def clock_reason_names(mask: int) -> list[str]:
    names = [name for bit, name in CLOCK_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_REASONS)
    return names + ([f"0x{rest:x}"] if rest else [])


@check("gpu.clock_events", needs=("nvml",),
       remedy="Hardware thermal slowdown: fix cooling. Power brake: the power supply or "
              "BMC asserted the external brake; check PSUs and the rack's power budget. "
              "Software thermal slowdown: cooling is marginal. A GPU slowed down this way "
              "makes every collective in the job wait for it.",
       actions=(Action.INVESTIGATE,))
def clock_events(ctx: CheckContext) -> Iterator[Finding]:
    """No hardware slowdown (thermal, power brake) or software thermal slowdown is active.

    HW thermal slowdown (0x40) and power brake (0x80) fail: clocks are cut by half or
    more, and the GPU becomes the job's straggler. HW slowdown (0x8) alone warns, since
    NVML also reports it briefly during P-state changes, and fails when the previous
    sample showed it too (sustained). SW thermal (0x20) warns. Idle, application clocks,
    the software power cap and sync boost are normal operation.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        comp, mask = component(gpu), gpu.clock_event_reasons
        if mask is None:
            yield missing(gpu, "clock event reasons", "clock_event_reasons")
            continue
        observed = {"mask": f"0x{mask:x}", "reasons": clock_reason_names(mask)}
        prev = previous_gpu(ctx, gpu)
        sustained = bool(prev and prev.clock_event_reasons is not None
                         and prev.clock_event_reasons & HW_SLOWDOWN)
        if mask & POWER_BRAKE:
            yield Finding.fail(comp, "hardware power brake slowdown active", observed,
                               "no power brake", Action.INVESTIGATE)
        if mask & HW_THERMAL:
            yield Finding.fail(comp, "hardware thermal slowdown active", observed,
                               "no thermal slowdown", Action.INVESTIGATE)
        if mask & HW_SLOWDOWN and not mask & (POWER_BRAKE | HW_THERMAL):
            if sustained:
                yield Finding.fail(comp, "hardware slowdown active in consecutive samples",
                                   observed, "no hardware slowdown", Action.INVESTIGATE)
            else:
                yield Finding.warn(comp, "hardware slowdown active", observed,
                                   "no hardware slowdown", Action.INVESTIGATE)
        if mask & SW_THERMAL:
            yield Finding.warn(comp, "software thermal slowdown active", observed,
                               "no thermal slowdown", Action.INVESTIGATE)
        if not mask & (POWER_BRAKE | HW_THERMAL | HW_SLOWDOWN | SW_THERMAL):
            yield Finding.passed(comp, "no hardware or thermal slowdown", observed)


APPLICATION_CLOCKS = 0x2  # nvmlClocksEventReasonApplicationsClocksSetting (UserDefinedClocks)


@check("gpu.clocks", needs=("nvml",),
       params={
           # An SM clock this far under the maximum, with the application/locked-clock
           # reason active, is a clock someone capped (nvidia-smi -lgc/-ac); the margin
           # leaves room for boost steps (15 MHz bins) near the top.
           "below_max_pct": 5,
           # Share of the time between two samples the GPU spent in thermal or power-brake
           # slowdown (fields 269-271). No peer publishes a time-share limit; for scale,
           # gpud's hw-slowdown component calls a GPU unhealthy at 0.6 slowdown events a
           # minute over 10 minutes (peers.md §2.1).
           "max_slowdown_share": 0.05,
       },
       remedy="A GPU slower than its peers holds back every collective of the job. Locked "
              "or application clocks: reset them (`nvidia-smi -rgc`, `nvidia-smi -rac`) or "
              "find the script or policy that sets them. Time spent in thermal slowdown "
              "or power braking: check cooling, the PSUs and the BMC's power policy, as for "
              "gpu.clock_events.",
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def clocks(ctx: CheckContext) -> Iterator[Finding]:
    """Stragglers: an SM clock held below its maximum by an application or locked-clock
    setting, and slowdown time that grows between samples.

    The first needs one sample: the ApplicationsClocksSetting reason (0x2) active with the
    SM clock more than ``below_max_pct`` under the maximum (an idle GPU drops its clock
    with the reason clear, and is not judged). The second needs an earlier sample: the
    thermal and power-brake slowdown time (ns) grown by more than ``max_slowdown_share``
    of the interval, however briefly each episode lasted. Both warn: the GPU works, slowly.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    dt = sample_interval(ctx.previous, ctx.snapshot)
    for gpu in gpus:
        comp = component(gpu)
        found = list(_held_clock(gpu, float(ctx.params["below_max_pct"])))
        prev = previous_gpu(ctx, gpu)
        if dt is not None and prev is not None:
            found += _slowdown_time(gpu, prev, dt, float(ctx.params["max_slowdown_share"]))
        if any(f.status is not Status.PASS for f in found):
            yield from (f for f in found if f.status is not Status.PASS)
        elif gpu.sm_clock_mhz is None or gpu.sm_clock_max_mhz is None:
            yield missing(gpu, "SM clock", "sm_clock", "sm_clock_max")
        else:
            yield Finding.passed(comp, "SM clock not held below its maximum",
                                 {"sm_clock_mhz": gpu.sm_clock_mhz,
                                  "max_mhz": gpu.sm_clock_max_mhz})


def _held_clock(gpu: Gpu, below_max_pct: float) -> Iterator[Finding]:
    mask, cur, top = gpu.clock_event_reasons, gpu.sm_clock_mhz, gpu.sm_clock_max_mhz
    if mask is None or cur is None or not top or not mask & APPLICATION_CLOCKS:
        return
    if cur < top * (1 - below_max_pct / 100):
        yield Finding.warn(component(gpu), "SM clock held below its maximum by an "
                           "application or locked-clock setting",
                           {"sm_clock_mhz": cur, "max_mhz": top,
                            "reasons": clock_reason_names(mask)},
                           f">= {top * (1 - below_max_pct / 100):.0f} MHz", Action.FIX_CONFIG)


def _slowdown_time(gpu: Gpu, prev: Gpu, dt: float, max_share: float) -> Iterator[Finding]:
    grown = {name: now - before for name, now in gpu.clock_event_time_ns.items()
             if (before := prev.clock_event_time_ns.get(name)) is not None and now >= before}
    share = sum(grown.values()) / (dt * 1e9)
    if grown and share > max_share:
        yield Finding.warn(component(gpu), "GPU spent time in thermal or power-brake "
                           "slowdown between samples",
                           {"slowdown_ns": {k: v for k, v in grown.items() if v},
                            "seconds": round(dt, 3), "share": round(share, 3)},
                           f"<= {max_share:g} of the time", Action.INVESTIGATE)


@check("gpu.power_limit", needs=("nvml",),
       params={
           # Site's intended limit in W; default: the profile's gpu_power_limit_w, else the
           # GPU's default limit.
           "expected_w": None,
           # Allowed shortfall in percent: limits are set in whole watts and some boards
           # enforce a few W under their nominal TDP.
           "tolerance_pct": 5,
       },
       remedy="Restore the power limit (`nvidia-smi -pl <W>` or remove the cap set by a "
              "script, the BMC or a DCGM policy) or set expected_w if the cap is intended.",
       actions=(Action.FIX_CONFIG,))
def power_limit(ctx: CheckContext) -> Iterator[Finding]:
    """The enforced power limit is not below the expected limit (power capped)."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    tolerance = float(ctx.params["tolerance_pct"])
    for gpu in gpus:
        comp = component(gpu)
        limit = gpu.power_limit_w  # NVML field 190, the current (enforced) limit
        reference = ctx.params["expected_w"] or ctx.profile.gpu_power_limit_w \
            or gpu.power_default_limit_w
        if limit is None:
            yield missing(gpu, "power limit", "power_current_limit", FIELDS)
            continue
        if reference is None:
            yield missing(gpu, "default power limit", "power_default_limit", FIELDS)
            continue
        observed = {"limit_w": limit, "default_w": gpu.power_default_limit_w}
        floor = float(reference) * (1 - tolerance / 100)
        expected = f">= {float(reference):g} W"
        if limit < floor:
            yield Finding.warn(comp, "power capped below the expected limit", observed,
                               expected, Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "power limit as expected", observed, expected)


# --- gpu.pcie_link, gpu.pcie_replay_rate ---------------------------------------------

# Link speed in GT/s -> PCIe generation.
_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def gen_from_gts(gts: float | None) -> int | None:
    if gts is None:
        return None
    return _GEN_BY_GTS.get(round(float(gts), 1))


@dataclass(frozen=True)
class LinkView:
    """What the GPU's link is and what it should be, from NVML, sysfs and the profile."""

    gen: int | None
    width: int | None
    max_gen: int | None
    max_width: int | None


def link_view(snap: Snapshot, gpu: Gpu, profile_gen: int | None,
              profile_width: int | None) -> LinkView:
    """Expected = the smallest of the GPU's and its upstream port's capability and the
    profile, so a Gen4 slot or an x8 bifurcation is not blamed on the GPU."""
    pci = {norm_bdf(d.bdf): d for d in snap.pci or []}
    dev = pci.get(norm_bdf(gpu.pci_bdf))
    parent = pci.get(norm_bdf(dev.path[-2])) if dev is not None and len(dev.path) >= 2 \
        else None
    ends = [d for d in (dev, parent) if d is not None]
    gens = [g for d in ends if (g := gen_from_gts(d.max_link_speed_gts))] + \
        ([profile_gen] if profile_gen else [])
    widths = [w for d in ends if (w := d.max_link_width)] + \
        ([profile_width] if profile_width else [])
    gen = gpu.pcie_gen_current
    if gen is None and dev is not None:
        gen = gen_from_gts(dev.current_link_speed_gts)
    width = gpu.pcie_width_current
    if width is None and dev is not None:
        width = dev.current_link_width
    return LinkView(gen, width, min(gens) if gens else None, min(widths) if widths else None)


@check("gpu.pcie_link", needs=("nvml", "pci"),
       remedy="A GPU link narrower than its slot is a physical fault: reseat the GPU or "
              "its riser/cable, check the slot, then have the board inspected (a reboot "
              "retrains the link but rarely restores lanes). A slower generation under load "
              "points at signal integrity or a BIOS setting (slot forced to a lower Gen).",
       actions=(Action.INVESTIGATE,))
def pcie_link(ctx: CheckContext) -> Iterator[Finding]:
    """PCIe link width at its maximum; generation at its maximum when the GPU is in P0.

    Width is judged always. The generation drops at idle by design (P8 runs Gen1,
    hardware.md §1.9), so it is judged only in P-state 0. Expected values are the smaller
    of the GPU's and the upstream port's capability (sysfs) and the profile.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    prof = ctx.profile
    for gpu in gpus:
        comp = component(gpu)
        link = link_view(ctx.snapshot, gpu, prof.gpu_pcie_gen, prof.gpu_pcie_width)
        if link.width is None:
            yield missing(gpu, "PCIe link width", "pcie_width")
        elif link.max_width is None:
            yield skip_finding(comp, "no expected PCIe width (not in sysfs or the profile)",
                               link.width)
        elif link.width < link.max_width:
            # DCGM's pcie plugin fails below min_pci_width (peers.md §2.2).
            yield Finding.fail(comp, "PCIe link narrower than its maximum", f"x{link.width}",
                               f"x{link.max_width}", Action.INVESTIGATE)
        else:
            yield Finding.passed(comp, "PCIe link width at maximum", f"x{link.width}",
                                 f"x{link.max_width}")
        pstate = gpu.performance_state
        observed = {"gen": link.gen, "pstate": pstate}
        if link.gen is None:
            yield missing(gpu, "PCIe link generation", "pcie_gen")
        elif link.max_gen is None:
            yield skip_finding(comp, "no expected PCIe generation (not in sysfs or the "
                                     "profile)", observed)
        elif pstate != 0:
            yield Finding.passed(comp, "PCIe generation not judged at idle (P-state not 0)",
                                 observed, f"Gen{link.max_gen} in P0")
        elif link.gen < link.max_gen:
            # In P0 the link runs at its top speed (hardware.md §1.9): a lower Gen here
            # is a downtrained link that caps H2D and GPUDirect RDMA bandwidth.
            yield Finding.fail(comp, "PCIe link slower than its maximum generation in P0",
                               observed, f"Gen{link.max_gen}", Action.INVESTIGATE)
        else:
            yield Finding.passed(comp, "PCIe generation at maximum", observed,
                                 f"Gen{link.max_gen}")


@check("gpu.pcie_replay_rate", needs=("nvml", "pci"), rate=True,
       params={
           # DCGM health watch (peers.md §2.2, DcgmGPUHardwareLimits.h): replays per minute
           # allowed = ceil(per-lane rate x lanes); per lane Gen1 0.15 ... Gen6 3.84.
           "per_lane_per_min": {"1": 0.15, "2": 0.3, "3": 0.48, "4": 0.96, "5": 1.92,
                                "6": 3.84},
           "max_per_min": None,  # a fixed limit instead of DCGM's per-lane rule
           "min_events": DEFAULT_MIN_EVENTS,
       },
       remedy="A fast-growing replay counter means a marginal PCIe link (retransmitted "
              "packets): reseat the GPU or riser, check the slot and PCIe AER counters of "
              "the upstream port, then have the board inspected.",
       actions=(Action.INVESTIGATE,))
def pcie_replay_rate(ctx: CheckContext) -> Iterator[Finding]:
    """PCIe replay counter growth stays under DCGM's per-lane, per-generation rate.

    Needs two samples (``--level full`` or the agent's history) and at least
    ``min_events`` replays between them before a rate is judged.
    """
    dt = sample_interval(ctx.previous, ctx.snapshot)
    if dt is None:
        yield skip_finding(NODE, "needs an earlier sample (--level full or the agent)")
        return
    gpus, skips = answering_gpus(ctx)
    yield from skips
    prof, min_events = ctx.profile, int(ctx.params["min_events"])
    for gpu in gpus:
        comp, prev = component(gpu), previous_gpu(ctx, gpu)
        if gpu.pcie_replay_count is None:
            yield missing(gpu, "PCIe replay counter", "pcie_replay", FIELDS)
            continue
        rate = counter_rate(prev.pcie_replay_count if prev else None, gpu.pcie_replay_count, dt)
        if rate is None:
            yield skip_finding(comp, "GPU not in the earlier sample")
            continue
        limit = _replay_limit(ctx.params, link_view(ctx.snapshot, gpu, prof.gpu_pcie_gen,
                                                    prof.gpu_pcie_width))
        if limit is None:
            yield skip_finding(comp, "PCIe generation and width unknown: no replay limit",
                               rate.to_dict())
        elif rate.over_per_min(limit, min_events):
            yield Finding.warn(comp, "PCIe replay rate above the limit",
                               {**rate.to_dict(), "min_events": min_events},
                               f"<= {limit:g} per min", Action.INVESTIGATE)
        else:
            yield Finding.passed(comp, "PCIe replay rate within the limit",
                                 {**rate.to_dict(), "min_events": min_events},
                                 f"<= {limit:g} per min")


def _replay_limit(params: Mapping[str, Any], link: LinkView) -> float | None:
    if params.get("max_per_min") is not None:
        return float(params["max_per_min"])
    gen = max(g for g in (link.gen, link.max_gen, 0) if g is not None)
    lanes = max(w for w in (link.width, link.max_width, 0) if w is not None)
    table: Mapping[Any, Any] = params["per_lane_per_min"]
    per_lane = table.get(str(gen), table.get(gen))
    if not gen or not lanes or per_lane is None:
        return None
    return float(math.ceil(float(per_lane) * lanes))


# --- modes, processes, memory size, InfoROM -------------------------------------------


@check("gpu.persistence_mode", needs=("nvml",), params={"required": True},
       remedy="Enable persistence: run nvidia-persistenced (systemctl enable --now "
              "nvidia-persistenced) or `nvidia-smi -pm 1`. Without it the driver tears "
              "each GPU down between clients and the next job pays seconds of init.",
       actions=(Action.FIX_CONFIG,))
def persistence_mode(ctx: CheckContext) -> Iterator[Finding]:
    """Persistence mode is enabled (gpud: supported-but-off is unhealthy; DCGM r1 warns)."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    required = bool(ctx.params["required"])
    for gpu in gpus:
        comp = component(gpu)
        if gpu.persistence_mode is None:
            yield missing(gpu, "persistence mode", "persistence_mode")
        elif gpu.persistence_mode:
            yield Finding.passed(comp, "persistence mode enabled", True, True)
        elif required:
            yield Finding.warn(comp, "persistence mode disabled", False, True,
                               Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "persistence mode disabled (not required)", False)


@check("gpu.mig_mode", needs=("nvml",), params={"mig": "disabled"},
       remedy="Set MIG as the partition expects (`nvidia-smi -i N -mig 0|1`) and reset the "
              "GPU (or reboot) to apply a pending change; or set checks.gpu.mig_mode.mig.",
       actions=(Action.FIX_CONFIG, Action.RESET_GPU))
def mig_mode(ctx: CheckContext) -> Iterator[Finding]:
    """MIG mode is what the config wants: ``disabled`` (default), ``enabled`` or ``any``."""
    want = str(ctx.params["mig"]).lower()
    if want not in ("disabled", "enabled", "any"):
        yield error_finding(NODE, "checks.gpu.mig_mode.mig must be disabled, enabled or any",
                            want)
        return
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        comp, cur, pending = component(gpu), gpu.mig_enabled, gpu.mig_pending
        if cur is None:
            if want == "enabled" and "mig_mode" in gpu.unsupported:
                yield Finding.fail(comp, "MIG required but not supported on this GPU",
                                   gpu.unsupported["mig_mode"], "enabled", Action.FIX_CONFIG)
            else:
                yield missing(gpu, "MIG mode", "mig_mode")
            continue
        observed = {"current": _mig(cur), "pending": _mig(pending)}
        ok = want == "any" or _mig(cur) == want
        if not ok and pending is not None and _mig(pending) == want:
            yield Finding.fail(comp, "MIG mode change pending: reset the GPU to apply",
                               observed, want, Action.RESET_GPU)
        elif not ok:
            yield Finding.fail(comp, f"MIG {_mig(cur)} but the config wants it {want}",
                               observed, want, Action.FIX_CONFIG)
        elif pending is not None and pending != cur:
            yield Finding.warn(comp, "MIG mode change pending (applies at the next GPU reset)",
                               observed, _mig(cur), Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, f"MIG {_mig(cur)}", observed, want)


def _mig(flag: bool | None) -> str | None:
    return None if flag is None else ("enabled" if flag else "disabled")


@check("gpu.processes", needs=("nvml",),
       params={
           # The job's GPUs (the prolog and epilog fill it from SLURM_JOB_GPUS or
           # CUDA_VISIBLE_DEVICES): minor numbers of /dev/nvidiaN as gres.conf File= names
           # them (matched through nvmlDeviceGetMinorNumber, never as NVML indexes) or
           # GPU- UUIDs, a list or "0,1,2"; None = every GPU, or unknown within a job.
           "job_gpus": None,
           # The Slurm job being started or ended; None outside Slurm (``run``). With a
           # job, each process is attributed by its cgroup (GpuProcess.slurm_job).
           "job_id": None,
           # gres/shard or gres/mps: the job's GPUs are shared with other jobs, whose
           # processes are expected there (the prolog sets it from Slurm's variables).
           "shared": False,
           # Modes where a leftover process fails: before a job (prolog, run) and after it
           # (epilog). The agent and healthcheck run beside jobs, so there it is noted only.
           "fail_modes": ["prolog", "epilog", "run"],
       },
       remedy="A process still holds the GPU: find it (nvidia-smi, the pid's /proc entry), "
              "end it or let the epilog kill the previous job's leftovers; drain the node "
              "until the GPU is free (a zombie holding GPU memory may need a reboot).",
       actions=(Action.DRAIN, Action.FIX_CONFIG))
def processes(ctx: CheckContext) -> Iterator[Finding]:
    """No compute process is left on the job's GPUs (all GPUs unless ``job_gpus`` is set).

    Within a Slurm job (``job_id``) each process is judged by whose it is, from its
    cgroup: on the job's own GPUs, when Slurm gave them to this job alone, any process
    but the job's is a leftover (the GPU is not free) and, at the epilog, the job's own
    are too. Where the GPUs are shared (gres/shard, gres/mps) or unknown (a CPU-only job,
    NoDevFiles, MIG UUIDs), other jobs' processes are theirs and never judged, nor those
    whose cgroup cannot be read: only the job's own leftovers fail at the epilog, and,
    where the GPUs are unknown and not shared, a process in no job at all (nobody's
    leftover). The MPS server is never a leftover. Outside a job every process on a
    judged GPU counts.
    """
    job = ctx.params.get("job_id")
    job = None if job is None else str(job)
    gpus, skips = answering_gpus(ctx)
    wanted = _job_gpus(ctx.params.get("job_gpus"), gpus)
    if isinstance(wanted, Finding):
        yield wanted
        return
    if isinstance(wanted, str):
        yield Finding.warn(NODE, "job_gpus names a GPU NVML does not enumerate", wanted,
                           sorted(g.minor_number for g in gpus if g.minor_number is not None),
                           Action.FIX_CONFIG)
        wanted = None  # unknown: judge no other job's processes
    if wanted is not None and not wanted:
        yield skip_finding(NODE, "the job has no GPU")
        return
    yield from (f for f in skips if wanted is None or f.component == NODE
                or int(f.component[3:]) in wanted)
    judge = ctx.mode in set(ctx.params.get("fail_modes") or [])
    shared = bool(ctx.params.get("shared"))
    for gpu in gpus:
        theirs = wanted is None or gpu.index in wanted
        if job is None and not theirs:
            continue
        comp = component(gpu)
        if gpu.processes is None:
            if theirs:
                yield missing(gpu, "GPU process list", "processes")
            continue
        exclusive = theirs and wanted is not None and not shared
        judged = [p for p in gpu.processes if p.name != MPS_SERVER and _counts(
            p.slurm_job, job, ctx.mode, exclusive=exclusive,
            nobodys=wanted is None and not shared)]
        if judged and judge:
            yield Finding.fail(comp, "compute processes left on the GPU", _observed(judged), [],
                               Action.DRAIN)
        elif gpu.processes and (judged or job is None):
            yield Finding.passed(comp, f"compute processes on the GPU (not judged in "
                                 f"{ctx.mode} mode)", _observed(gpu.processes))
        elif gpu.processes:
            yield Finding.passed(comp, "only other jobs' processes on the GPU (not judged)",
                                 _observed(gpu.processes))
        elif theirs:
            yield Finding.passed(comp, "no compute process on the GPU", [], [])


MPS_SERVER = "nvidia-cuda-mps-server"


def _counts(owner: str | None, job: str | None, mode: str, *, exclusive: bool,
            nobodys: bool) -> bool:
    """Whether a process on a GPU is a leftover: outside a job, every one; within one,
    the job's own at its end, on a GPU the job holds alone everyone else's too, and
    where ``nobodys``, one in no job's cgroup."""
    if job is None:
        return True
    if owner == job:
        return mode == "epilog"
    return exclusive or (nobodys and owner == "")


def _observed(procs: list[Any]) -> list[dict[str, Any]]:
    return [{"pid": p.pid, "name": p.name, "used_memory_bytes": p.used_memory_bytes,
             "slurm_job": p.slurm_job} for p in procs[:10]]


def _job_gpus(value: Any, gpus: list[Any]) -> set[int] | str | Finding | None:
    """The NVML indexes of the GPUs ``value`` names (minor numbers or UUIDs); None when
    it names none; the first name no GPU answers to (by minor number or UUID) when one
    cannot be placed."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list):
        return error_finding(NODE, "checks.gpu.processes.job_gpus must be minor numbers or "
                             "GPU UUIDs", value)
    by_minor = {g.minor_number: g.index for g in gpus if g.minor_number is not None}
    by_uuid = {g.uuid.lower(): g.index for g in gpus if isinstance(g.uuid, str)}
    found: set[int] = set()
    for item in (str(v).strip() for v in items):
        if item.isascii() and item.isdigit():
            index = by_minor.get(int(item))
        elif item.lower().startswith("gpu-"):
            index = by_uuid.get(item.lower())
        elif not item:
            continue
        else:
            return error_finding(NODE, "checks.gpu.processes.job_gpus must be minor numbers "
                                 "or GPU UUIDs", value)
        if index is None:
            return item
        found.add(index)
    return found


_SIZE_IN_NAME = re.compile(r"(\d+)\s*GB\b")


@check("gpu.memory_size", needs=("nvml",),
       params={
           "expected_gib": None,  # default: the size in the model name, else the profile
           # NVML's total is a little under the marketed size (H100 80GB: 81559 MiB =
           # 79.6 GiB; H200: 143771 MiB = 140.4 GiB in nvidia-smi -q captures).
           "tolerance_pct": 5,
       },
       remedy="Less memory than the model has: a GPU of the profile's model reporting less "
              "memory has lost capacity (Xid 168) and goes to RMA; otherwise check that "
              "the node runs the GPUs its profile says.",
       actions=(Action.RMA, Action.INVESTIGATE, Action.FIX_CONFIG))
def memory_size(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU's memory is the expected size, within ``tolerance_pct``."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    tolerance = float(ctx.params["tolerance_pct"]) / 100
    for gpu in gpus:
        comp = component(gpu)
        expected = _expected_gib(ctx, gpu)
        if gpu.memory_total_bytes is None:
            yield missing(gpu, "memory size", "memory")
            continue
        if expected is None:
            yield skip_finding(comp, "no expected memory size (profile, model name or "
                                     "config)", round(gpu.memory_total_bytes / GIB, 1))
            continue
        gib = round(gpu.memory_total_bytes / GIB, 1)
        if gib < expected * (1 - tolerance):
            known_model = gpu.name is not None and gpu.name in ctx.profile.gpu_models
            yield Finding.fail(comp, "less GPU memory than expected", gib, f"{expected} GiB",
                               Action.RMA if known_model else Action.INVESTIGATE)
        elif gib > expected * (1 + tolerance):
            yield Finding.warn(comp, "more GPU memory than expected", gib, f"{expected} GiB",
                               Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "GPU memory size as expected", gib, f"{expected} GiB")


def _expected_gib(ctx: CheckContext, gpu: Gpu) -> float | None:
    if ctx.params.get("expected_gib") is not None:
        return float(ctx.params["expected_gib"])
    if gpu.name and gpu.name in ctx.profile.gpu_models:
        m = _SIZE_IN_NAME.search(gpu.name)  # "NVIDIA A100-SXM4-40GB" in an 80 GB profile
        if m:
            return float(m[1])
    return float(ctx.profile.gpu_memory_gib) if ctx.profile.gpu_memory_gib else None


@check("gpu.inforom", needs=("nvml",),
       remedy="A corrupted InfoROM loses the GPU's error records (ECC, retired pages, "
              "remapped rows): collect nvidia-bug-report.sh and open an RMA case.",
       actions=(Action.RMA,))
def inforom(ctx: CheckContext) -> Iterator[Finding]:
    """The InfoROM checksum is valid (nvmlDeviceValidateInforom; CorruptedInforom fails)."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        if gpu.inforom_valid is None:
            yield missing(gpu, "InfoROM validity", "inforom_valid")
        elif gpu.inforom_valid:
            yield Finding.passed(component(gpu), "InfoROM valid", gpu.inforom_image)
        else:
            yield Finding.fail(component(gpu), "InfoROM corrupted", gpu.inforom_image,
                               "valid", Action.RMA)


# The memory-health half of the family registers itself on import.
