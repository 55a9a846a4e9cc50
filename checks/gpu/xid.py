"""gpu.xid: the Xid errors the driver logged (kernel log) or reported (NVML events),
classified by NVIDIA's Xid Catalog (xid_catalog.py)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from ...agent.model import Snapshot
from ...agent.model.gpu import Gpu
from ...agent.model.kernel import KernelEvent, KernelLog
from ...agent.model.pci import normalize_bdf
from ...agent.model.record import record
from ..catalogs.xid_catalog import NVLINK5, XID_CATALOG, XidInfo, xid_info
from ..core.common import NODE, gpu_component, nvml_usable
from ..core.finding import Action, Finding, Status
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from ..core.validation import XID_RESET
from .recovery import RECOVERY_ACTIONS, recovery_finding

# The severity word of a 144-150 line ("NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (...)",
# gpud's GB200 kmsg fixtures; its RegexNVRMXidExtended reads the same token).
# Patterns as strings: compiled on first use, through re's own cache (a healthy node never
# prints these lines; compiling at import cost every prolog).
_NVLINK5_SEVERITY = r"\b(Nonfatal|Non-fatal|Fatal)\b"
_NEW_RECOVERY = r"\bto (0x[0-9a-fA-F]+|\d+)"
# The events key of Xid lines whose address was elided ("NVRM: Xid (PCI:...): 79, ...").
_UNIDENTIFIED = "unknown"

# Every action the catalog, a Fatal NVLink5 line or an Xid 154 recovery value can ask for.
_XID_ACTIONS = tuple(sorted(
    ({Action(i.action) for i in XID_CATALOG.values()}
     | {a for _, _, a in RECOVERY_ACTIONS.values()} | {Action.INVESTIGATE, Action.RESET_GPU})
    - {Action.NONE}, key=lambda a: a.value))


@record(frozen=True)
class _Event:
    code: int
    time: float | None
    uptime: float | None
    pid: int | None
    message: str
    source: str = "log"


@parameters
class XidParams(Params):
    window_s: int = param(
        7200, ge=0, doc="how far back an Xid counts, in seconds: AzNHC greps syslog "
        "over a 2 h window (azurehpc-health-checks' Xid check)")
    burst_s: float = param(
        60.0, ge=0, doc="lines of one code closer than this (seconds) are one occurrence: "
        "one fault prints a burst of identical lines (16 Xid 13 lines in 2 ms in gpud's "
        "dmesg.decode.iso.log; Xid 119 repeats every 6 s while nvidia-smi waits on GSP)")
    repeat_thresholds: Mapping[int, int] = param(
        {}, ge=1, doc="Xid code -> occurrences before it counts, over the catalog's "
        "repeat_threshold (gpud's --xid-thresholds; users ask for per-Xid tuning, "
        "gpud#1165)")
    ignore: tuple[int, ...] = param(
        (), ge=0, doc="Xid codes never judged (k8s-device-plugin's DP_DISABLE_HEALTHCHECKS "
        "list)")


@check("gpu.xid", validation=XID_RESET, needs=("kernel_log", "nvml"), params=XidParams,
       remedy="Act on NVIDIA's immediate action for the code (its Xid Catalog, "
              "checks/catalogs/xid_catalog.tsv): RESET_GPU / WORKFLOW_XID_48 / "
              "WORKFLOW_NVLINK_ERR: reset the GPU (`nvidia-smi -r -i N`, no processes on it) and "
              "check ECC, row remapping and NVLink state after it; RESTART_BM / RESTART_VM: reboot"
              " the node; CHECK_MECHANICALS (Xid 54): connect or reseat the GPU board's auxiliary "
              "power cable; a Fatal NVLink5 Xid (144-150): reset the GPU, then check the link's "
              "peer and cable; Xid 154: do what the new recovery action says. A GPU that repeats "
              "the same Xid after a reset goes to RMA. RESTART_APP codes point at the job and only"
              " warn when one GPU produces them across jobs.",
       actions=_XID_ACTIONS)
def xid(ctx: CheckContext) -> Iterator[Finding]:
    """Recent Xid errors per GPU, classified by code; older ones are only mentioned.

    Only Xids inside ``window_s`` and after the GPU's last reset (a driver load the GPU
    came back from, answering NVML now, or read without NVML, one the driver printed no
    probe failure beside; or a logged reset) and the last boot count; a saved log's line
    with no time of its own takes the time of the line before it, and a live kmsg record
    with none (the boot time unknown) counts as recent: the buffer holds this boot only. A
    log read only in part (a deadline) or placed in time only approximately warns: its
    Xids are judged, but "no Xid errors" is not claimed for lines never read. A burst
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
        yield Finding.skip(NODE, "kernel log not collected: Xid history unknown")
        return
    if log is not None and not log.xids and not log.lines_read and log.unknown \
            and not nvml_events:
        yield Finding.skip(NODE, "kernel log unreadable: Xid history unknown", dict(log.unknown))
        return
    gpus = nvml.gpus if nvml else []
    by_bdf = _gpus_by_bus_id(snap, gpus)
    by_index = {g.index: g for g in gpus}
    events: dict[str, list[_Event]] = {}  # "gpu3", or a bus id no NVML GPU has
    for x in log.xids if log else []:
        key = _gpu_key(by_bdf.get(normalize_bdf(x.pci_bdf) or ""), x.pci_bdf)
        events.setdefault(key, []).append(_Event(x.xid, x.time, x.uptime_s, x.pid, x.message))
    params = XidParams.of(ctx)
    burst_s = params.burst_s
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
        probed = _probed(gpu, key, gpus, unanswered, nvml_usable(nvml))
        resets = _resets(log, gpu, key, probed)
        recent: list[_Event] = []
        history: Counter[int] = Counter()
        for ev in events[key]:
            if _is_recent(ev, now, params.window_s, resets, log):
                recent.append(ev)
            else:
                history[ev.code] += 1
        comp = key if gpu is not None else NODE
        lost = gpu is not None and (bool(gpu.lost) or gpu.index in unanswered)
        state = gpu if gpu is not None and nvml_usable(nvml) else None
        judged = _judge(params, comp, key, state, lost, recent)
        yield from (_unidentified(f) for f in judged) if key == _UNIDENTIFIED else judged
        if history:
            yield Finding.passed(
                comp, "older Xid errors outside the window or before the last reset",
                {"gpu": key, "history": dict(sorted(history.items()))})
    cut = _read_in_part(log)
    yield from (Finding.warn(NODE, message, {"kernel_log": reason})
                for message, reason in cut.items())
    if any(key in _CUT_SHORT for key in (log.unknown if log else {})):
        return  # the lines not read may hold Xids: "no Xid errors" is not known
    for gpu in gpus:
        if gpu_component(gpu) not in events:
            yield Finding.passed(gpu_component(gpu), "no Xid errors in the kernel log")
    if not events and not gpus:
        yield Finding.passed(NODE, "no Xid errors in the kernel log")


# ``KernelLog.unknown`` keys saying a read that got lines stopped before the log's end
# (``time``: lines placed only approximately).
_CUT_SHORT = ("file", "kmsg")


def _read_in_part(log: KernelLog | None) -> dict[str, str]:
    """Warnings for a kernel log read only in part or placed in time only approximately:
    an empty event list from such a read is not a clean log, so it must not pass as one."""
    if log is None or not log.lines_read:
        return {}
    found = {f"kernel log read in part: {log.unknown[key]}": log.unknown[key]
             for key in _CUT_SHORT if key in log.unknown}
    if "time" in log.unknown:
        found[f"kernel log times approximate: {log.unknown['time']}"] = log.unknown["time"]
    return found


def _gpus_by_bus_id(snap: Snapshot, gpus: list[Gpu]) -> dict[str, Gpu]:
    """NVML GPUs by bus id. A GPU that was lost before NVML gave its bus id is matched
    to the one PCI GPU no NVML GPU claims, when there is exactly one of each."""
    by_bdf = {b: g for g in gpus if (b := normalize_bdf(g.pci_bdf))}
    orphans = [g for g in gpus if not g.pci_bdf]
    unclaimed = [b for d in snap.pci or [] if d.is_nvidia_gpu
                 and (b := normalize_bdf(d.bdf)) and b not in by_bdf]
    if len(orphans) == 1 and len(unclaimed) == 1:
        by_bdf[unclaimed[0]] = orphans[0]
    return by_bdf


def _gpu_key(gpu: Gpu | None, bdf: str | None) -> str:
    """``gpu3``; for a bus no NVML GPU has, the bus as an Xid line names it (no function);
    ``_UNIDENTIFIED`` for a line whose address was elided."""
    if gpu is not None:
        return gpu_component(gpu)
    address = normalize_bdf(bdf)
    return address.rsplit(".", 1)[0] if address else _UNIDENTIFIED


def _unidentified(finding: Finding) -> Finding:
    """Say that the Xid's GPU is unknown: its line elided the address, so the verdict is
    the catalog's but the operator has to find the GPU (the node is the component)."""
    if finding.status is Status.PASS:
        return finding
    return finding.replace(message=f"{finding.message} on an unidentified GPU")


def _key_order(key: str) -> tuple[int, str]:
    return (int(key[3:]), "") if key.startswith("gpu") and key[3:].isdigit() else (1 << 30, key)


def _probed(gpu: Gpu | None, key: str, gpus: list[Gpu], unanswered: set[int],
            usable: bool) -> bool | None:
    """Whether a driver reload brought this Xid's GPU back: NVML answering for it now (a
    bus NVML does not list is not back). For a GPU the Xid does not identify, every GPU
    NVML lists answering. None where NVML gives no evidence (a kernel log read alone):
    the log itself then decides."""
    if not usable or not gpus:
        return None
    if gpu is not None:
        return not gpu.lost and gpu.index not in unanswered
    if key == _UNIDENTIFIED:
        return all(not g.lost and g.index not in unanswered for g in gpus)
    return False


def _failed_probe_near(events: list[KernelEvent], reload: KernelEvent) -> bool:
    """The driver said beside this reload that it could not probe a GPU (it prints it as
    it loads): the reload brought not every GPU back."""
    for e in events:
        if e.kind != "gpu_probe_failed":
            continue
        if e.uptime_s is not None and reload.uptime_s is not None:
            if abs(e.uptime_s - reload.uptime_s) <= _PROBE_NEAR_S:
                return True
        elif e.time is not None and reload.time is not None \
                and abs(e.time - reload.time) <= _PROBE_NEAR_S:
            return True
    return False


_PROBE_NEAR_S = 60.0  # a reload's own probe messages come within seconds of its banner


def _resets(log: KernelLog | None, gpu: Gpu | None, key: str,
            probed: bool | None) -> list[tuple[float | None, float | None]]:
    """(time, uptime) of every logged reset that applies to this GPU.

    A driver load (no device) resets only the GPUs it probed again, and the log does not
    say which those were ("The NVIDIA probe routine failed for 1 device(s)" names none):
    ``probed`` is NVML answering for this GPU now. A GPU that fell off the bus and was
    not probed after the reload is as lost as before it. Without NVML the log decides: a
    reload with the driver's "probe routine failed" beside it brought not every GPU back.
    NVSentinel's acknowledgement names a UUID.
    """
    own = {normalize_bdf(gpu.pci_bdf) if gpu else None, normalize_bdf(key)} - {None}
    found: list[tuple[float | None, float | None]] = []
    events = log.events if log else []
    for e in events:
        if e.kind != "gpu_reset":
            continue
        dev = e.device
        if dev is None:
            back = probed if probed is not None else not _failed_probe_near(events, e)
            if back:
                found.append((e.time, e.uptime_s))
        elif ((gpu is not None and dev == gpu.uuid)
                or (not dev.startswith("GPU-") and normalize_bdf(dev) in own)):
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


def _threshold(params: XidParams, code: int, info: XidInfo | None) -> int:
    value = params.repeat_thresholds.get(code)
    if value is not None:
        return max(1, value)
    return info.repeat_threshold if info is not None else 1


def _judge(params: XidParams, comp: str, key: str, gpu: Gpu | None, lost: bool,
           recent: list[_Event]) -> Iterator[Finding]:
    """Findings for one GPU's recent Xids, one per code. ``gpu`` is None when NVML gives
    no current state for it (not enumerated, or NVML unusable)."""
    ignore = set(params.ignore)
    by_code: dict[int, list[_Event]] = {}
    for ev in recent:
        by_code.setdefault(ev.code, []).append(ev)
    for code in sorted(by_code):
        evs = by_code[code]
        info = xid_info(code)
        name = info.name if info else "unknown"
        fatal = [e for e in evs if nvlink5_severity(code, e.message) == "Fatal"]
        occ = _occurrences(evs, bool(info and info.application), params.burst_s)
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
        elif fatal:  # NVIDIA's "XID 144-150 Decode" sheet: a Fatal line needs a GPU reset
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
    m = re.search(_NVLINK5_SEVERITY, message)
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
    m = re.search(_NEW_RECOVERY, message)
    return int(m[1], 0) if m else None
