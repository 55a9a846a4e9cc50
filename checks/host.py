"""Host checks: CPUs, memory, disks, mounts, services, clock, kernel and PCIe AER.

Each check judges what the host, PCI and kernel-log collectors put in the snapshot and
nothing else. Messages are stable text so one problem on many nodes groups into one line
of the cluster report; the numbers of each node go in ``observed``/``expected``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..agent.model.host import HostInfo
from ..agent.model.kernel import KernelEvent
from ..agent.model.pci import PciDevice
from .finding import Action, Finding, Status
from .registry import CheckContext, check

GIB = 1 << 30
NODE = "node"


def _host(ctx: CheckContext) -> HostInfo | Finding:
    host = ctx.snapshot.host
    if host is None:
        return Finding.error(NODE, "host facts were not collected",
                             ctx.snapshot.sources.get("host"))
    return host


@check("host.cpu_count", needs=("host",), params={"min": None},
       remedy="CPUs are missing: check the BIOS (cores or SMT disabled) and whether the "
              "kernel offlined CPUs after machine checks (/sys/devices/system/cpu/online).",
       actions=(Action.INVESTIGATE,))
def cpu_count(ctx: CheckContext) -> Iterator[Finding]:
    """At least ``min`` logical CPUs are online (``min`` from config or profile)."""
    host = _host(ctx)
    minimum = ctx.params["min"]
    if isinstance(host, Finding):
        yield host
    elif minimum is None:
        yield Finding.skip(NODE, "no minimum CPU count configured")
    elif host.cpu_count is None:
        yield Finding.error(NODE, "CPU count unreadable", host.unknown.get("cpu_count"))
    elif host.cpu_count < minimum:
        yield Finding.fail(NODE, "fewer CPUs online than expected", host.cpu_count,
                           f">= {minimum}")
    else:
        yield Finding.passed(NODE, "CPU count as expected", host.cpu_count, f">= {minimum}")


@check("host.memory", needs=("host",),
       params={"min_gib": None, "edac_uncorrected_max": 0, "edac_corrected_warn": 100},
       remedy="Memory size below the minimum means a DIMM is missing or disabled; "
              "uncorrected EDAC errors mean a failing DIMM: find it with edac-util or the "
              "BMC event log and replace it. A reboot resets the counts, not the DIMM.",
       actions=(Action.INVESTIGATE,))
def memory(ctx: CheckContext) -> Iterator[Finding]:
    """Memory size (MemTotal, a little below installed RAM) and EDAC error counts.

    EDAC counts are totals since boot or driver load. Any uncorrected error means a DIMM
    or controller lost data; corrected errors are routine in small numbers, so only a
    count past ``edac_corrected_warn`` warns (a DIMM that starts to fail usually shows a
    rising corrected count first).
    """
    host = _host(ctx)
    if isinstance(host, Finding):
        yield host
        return
    min_gib = ctx.params["min_gib"]
    if min_gib is None:
        yield Finding.skip(NODE, "no minimum memory size configured")
    elif host.memory_total_bytes is None:
        yield Finding.error(NODE, "memory size unreadable", host.unknown.get("memory_total_bytes"))
    else:
        gib = round(host.memory_total_bytes / GIB, 1)
        if gib < min_gib:
            yield Finding.fail(NODE, "less memory than expected", gib, f">= {min_gib} GiB")
        else:
            yield Finding.passed(NODE, "memory size as expected", gib, f">= {min_gib} GiB")
    if not host.edac:
        yield Finding.skip(NODE, "no EDAC memory controllers exposed")
    ue_max, ce_warn = ctx.params["edac_uncorrected_max"], ctx.params["edac_corrected_warn"]
    for mc in host.edac:
        counts = {"corrected": mc.corrected, "uncorrected": mc.uncorrected}
        if mc.corrected is None or mc.uncorrected is None:
            reasons = {k: v for k, v in host.unknown.items() if k.startswith(f"edac.{mc.name}.")}
            yield Finding.error(mc.name, "EDAC error count unreadable", reasons)
        elif mc.uncorrected > ue_max:
            yield Finding.fail(mc.name, "uncorrected memory errors (EDAC)", counts,
                               f"uncorrected <= {ue_max}")
        elif mc.corrected > ce_warn:
            yield Finding.warn(mc.name, "many corrected memory errors (EDAC)", counts,
                               f"corrected <= {ce_warn}")
        else:
            yield Finding.passed(mc.name, "EDAC error counts within limits", counts)


@check("host.disk", needs=("host",),
       params={"paths": ["/", "/tmp"], "min_free_pct": 5, "min_free_inodes_pct": 5},
       remedy="Free space or inodes (leftover job output, core dumps, container images, "
              "logs in /var or /tmp), or widen the thresholds in config.",
       actions=(Action.INVESTIGATE,))
def disk(ctx: CheckContext) -> Iterator[Finding]:
    """Free space and inodes on ``paths``: fail below the minimum, warn below twice it."""
    host = _host(ctx)
    if isinstance(host, Finding):
        yield host
        return
    by_path = {d.path: d for d in host.disks}
    for path in ctx.params["paths"]:
        usage = by_path.get(path)
        if usage is None:
            yield Finding.error(path, "free space was not measured", "not in the snapshot")
        elif usage.error is not None:
            yield Finding.error(path, "cannot measure free space", usage.error)
        elif not usage.total_bytes or usage.free_bytes is None:
            yield Finding.skip(path, "filesystem reports no size")
        else:
            yield _free(path, "space", usage.free_bytes, usage.total_bytes,
                        ctx.params["min_free_pct"])
            if usage.inodes_total and usage.inodes_free is not None:  # btrfs reports 0
                yield _free(path, "inodes", usage.inodes_free, usage.inodes_total,
                            ctx.params["min_free_inodes_pct"])


def _free(path: str, what: str, free: int, total: int, minimum: float) -> Finding:
    pct = round(100.0 * free / total, 2)
    expected = f">= {minimum}% free"
    if pct < minimum:
        return Finding.fail(path, f"free {what} below the minimum", pct, expected)
    if pct < 2 * minimum:
        return Finding.warn(path, f"free {what} running low", pct, f">= {2 * minimum}% free")
    return Finding.passed(path, f"enough free {what}", pct, expected)


@check("host.mounts", needs=("host",), params={"required": []},
       remedy="Mount the filesystem (mount -a, or the automounter/systemd mount unit) and "
              "check why it was missing: a failed NFS/Lustre mount at boot is common.",
       actions=(Action.FIX_CONFIG,))
def mounts(ctx: CheckContext) -> Iterator[Finding]:
    """Every ``required`` mount is there with the right type.

    Entries are a path or ``{path: ..., fstype: ...}``. When several filesystems are
    stacked on one mountpoint the last one listed is the visible one, so it is judged.
    """
    host = _host(ctx)
    required = ctx.params["required"]
    if isinstance(host, Finding):
        yield host
        return
    if not required:
        yield Finding.skip(NODE, "no required mounts configured")
        return
    if "mounts" in host.unknown:
        yield Finding.error(NODE, "mount table unreadable", host.unknown["mounts"])
        return
    visible = {m.mountpoint: m for m in host.mounts}
    for entry in required:
        path, fstype = _mount_entry(entry)
        if path is None:
            yield Finding.error(NODE, "invalid required mount entry", entry)
            continue
        mount = visible.get(path)
        if mount is None:
            yield Finding.fail(path, "required filesystem not mounted", None,
                               fstype or "mounted", Action.FIX_CONFIG)
        elif fstype is not None and mount.fstype != fstype:
            yield Finding.fail(path, "filesystem mounted with the wrong type", mount.fstype,
                               fstype, Action.FIX_CONFIG)
        else:
            yield Finding.passed(path, "required filesystem mounted", mount.fstype, fstype)


def _mount_entry(entry: Any) -> tuple[str | None, str | None]:
    """(path, fstype) of a ``required`` entry; path None when the entry is malformed."""
    if isinstance(entry, str):
        return entry, None
    if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
        fstype = entry.get("fstype")
        return entry["path"], fstype if isinstance(fstype, str) else None
    return None, None


@check("host.services", needs=("host",), params={"required": []},
       remedy="Start the unit (systemctl start UNIT) and read why it stopped "
              "(systemctl status UNIT, journalctl -u UNIT).",
       actions=(Action.FIX_CONFIG,))
def services(ctx: CheckContext) -> Iterator[Finding]:
    """Every ``required`` systemd unit is active (a unit still starting warns)."""
    host = _host(ctx)
    required = ctx.params["required"]
    if isinstance(host, Finding):
        yield host
        return
    if not required:
        yield Finding.skip(NODE, "no required services configured")
        return
    if not host.has_systemd:
        yield Finding.skip(NODE, "host does not run systemd")
        return
    states = {s.name: s for s in host.services}
    for name in required:
        state = states.get(name)
        observed = state and f"{state.active}/{state.sub}"
        if state is None:
            yield Finding.error(name, "service state was not collected", None)
        elif state.error is not None:
            yield Finding.error(name, "systemctl did not answer", state.error)
        elif state.load == "not-found":
            yield Finding.fail(name, "required service not installed", state.load, "loaded",
                               Action.FIX_CONFIG)
        elif state.active in ("active", "reloading"):
            yield Finding.passed(name, "required service active", observed, "active")
        elif state.active == "activating":
            yield Finding.warn(name, "required service still starting", observed, "active")
        else:
            yield Finding.fail(name, "required service not active", observed, "active",
                               Action.FIX_CONFIG)


@check("host.clock_sync", needs=("host",),
       remedy="Check the time daemon (chronyc sources, timedatectl timesync-status) and "
              "that the node reaches its NTP servers.",
       actions=(Action.FIX_CONFIG,))
def clock_sync(ctx: CheckContext) -> Iterator[Finding]:
    """The clock is synchronised to NTP, as timedatectl, chronyc or ntpq tell.

    Not synchronised warns rather than fails: a training job does not need synced clocks,
    an unsynchronised clock is usually still close (it lost its server recently), and
    the skew that does break a job (Slurm's munge credentials, minutes) shows up there
    first. It is still worth fixing: logs across nodes stop lining up.
    """
    host = _host(ctx)
    if isinstance(host, Finding):
        yield host
        return
    clock = host.clock
    if clock is None or clock.method is None:
        if "clock" in host.unknown:
            yield Finding.error(NODE, "clock-sync tool did not answer", host.unknown["clock"])
        else:
            yield Finding.skip(NODE, "no way to tell clock sync (no timedatectl, chronyc "
                                     "or ntpq answered)")
    elif clock.synchronized:
        yield Finding.passed(NODE, "clock synchronised", clock.method)
    else:
        yield Finding.warn(NODE, "clock not synchronised", clock.detail, "synchronised",
                           Action.FIX_CONFIG)


def _param_name(name: str) -> str:
    """The kernel treats ``-`` and ``_`` in parameter names alike (``parameq``)."""
    return name.replace("-", "_")


def effective_cmdline(words: list[str]) -> dict[str, str | None]:
    """Kernel parameter name -> its last value (None for a bare flag).

    Words after ``--`` go to init, not the kernel. For an ordinary parameter the last
    occurrence wins, since each one is applied in order.
    """
    params: dict[str, str | None] = {}
    for word in words:
        if word == "--":
            break
        name, sep, value = word.partition("=")
        params[_param_name(name)] = value if sep else None
    return params


@check("host.kernel_cmdline", needs=("host",), params={"required": [], "forbidden": []},
       remedy="Fix the boot loader configuration (GRUB_CMDLINE_LINUX, then update-grub or "
              "grub2-mkconfig) and reboot.",
       actions=(Action.FIX_CONFIG,))
def kernel_cmdline(ctx: CheckContext) -> Iterator[Finding]:
    """``required`` and ``forbidden`` kernel parameters (``name`` or ``name=value``)."""
    host = _host(ctx)
    if isinstance(host, Finding):
        yield host
        return
    required, forbidden = ctx.params["required"], ctx.params["forbidden"]
    if not required and not forbidden:
        yield Finding.skip(NODE, "no kernel parameters configured")
        return
    if "cmdline" in host.unknown:
        yield Finding.error(NODE, "kernel command line unreadable", host.unknown["cmdline"])
        return
    params = effective_cmdline(host.cmdline)
    problems = 0
    for entry, wanted in [(e, True) for e in required] + [(e, False) for e in forbidden]:
        name, sep, value = str(entry).partition("=")
        name = _param_name(name)
        present = name in params and (not sep or params[name] == value)
        if present == wanted:
            continue
        problems += 1
        seen = None if name not in params else (
            name if params[name] is None else f"{name}={params[name]}")
        if wanted:
            yield Finding.fail(NODE, f"required kernel parameter missing: {entry}", seen,
                               entry, Action.FIX_CONFIG)
        else:
            yield Finding.fail(NODE, f"forbidden kernel parameter set: {entry}", seen,
                               f"not {entry}", Action.FIX_CONFIG)
    if not problems:
        yield Finding.passed(NODE, "kernel parameters as configured", host.cmdline,
                             {"required": required, "forbidden": forbidden})


_MCE_BANK = re.compile(r"Bank \d+: ([0-9a-f]{16})\b", re.IGNORECASE)


def mce_severity(event: KernelEvent) -> str | None:
    """``uncorrected``, ``corrected``, or None for a continuation line of an MCE dump.

    A dump header (``CPU 3: Machine Check: 0 Bank 5: be00000000800400``) carries the
    bank's MCi_STATUS; bit 61 (UC) says the error was not corrected (Intel SDM vol. 3B
    15.3.2.2, AMD APM vol. 2 9.3). The kernel's own summaries say which they are:
    ``Machine check events logged`` after corrected errors (CMCI/polling),
    ``Uncorrected hardware memory error in user-access`` after a poisoned page was hit.
    The RIP/TSC/PROCESSOR lines that follow a header repeat it and are not counted.
    """
    bank = _MCE_BANK.search(event.message)
    if bank:
        return "uncorrected" if int(bank.group(1), 16) >> 61 & 1 else "corrected"
    if re.search(r"Uncorrected hardware memory error|Machine Check Exception", event.message):
        return "uncorrected"
    if "Machine check events logged" in event.message:
        return "corrected"
    return None


# (category, threshold param, status, message, action), in the order findings are listed.
_KERNEL_RULES = (
    ("mce_uncorrected", "mce_uncorrected_fail", Status.FAIL,
     "uncorrected machine-check errors in the kernel log", Action.INVESTIGATE),
    ("hard_lockup", "hard_lockup_fail", Status.FAIL,
     "hard lockup in the kernel log", Action.REBOOT),
    ("soft_lockup", "soft_lockup_warn", Status.WARN,
     "soft lockup in the kernel log", Action.INVESTIGATE),
    ("hung_task", "hung_task_warn", Status.WARN,
     "hung tasks in the kernel log", Action.INVESTIGATE),
    ("nmi", "nmi_warn", Status.WARN,
     "hardware NMI in the kernel log", Action.INVESTIGATE),
    ("mce_corrected", "mce_corrected_warn", Status.WARN,
     "many corrected machine-check errors in the kernel log", Action.INVESTIGATE),
)


@check("host.kernel_errors", needs=("kernel_log",),
       params={"window_s": 7200, "mce_uncorrected_fail": 1, "hard_lockup_fail": 1,
               "soft_lockup_warn": 1, "hung_task_warn": 1, "nmi_warn": 1,
               "mce_corrected_warn": 10},
       remedy="Read the kernel log around the events. Machine checks: find the DIMM or CPU "
              "with rasdaemon/mcelog or the BMC event log. A hard lockup leaves the kernel "
              "in doubt: reboot. Hung tasks and soft lockups: find the driver or filesystem "
              "that stalls (the stack trace follows the message).",
       actions=(Action.INVESTIGATE, Action.REBOOT))
def kernel_errors(ctx: CheckContext) -> Iterator[Finding]:
    """Machine checks, lockups, hung tasks and NMIs the kernel logged within ``window_s``.

    Thresholds are counts of events in the window (events without a wall time count).
    An uncorrected machine check means data was lost (the kernel poisoned a page or
    killed a process) and a hard lockup means a CPU sat with interrupts off for ~10 s:
    either fails at once. A soft lockup or a hung task (120 s in D state) can be a
    stalled filesystem as much as a sick node, and an NMI may be a benign unknown-reason
    one, so those warn. Corrected machine checks are normal in small numbers; the kernel
    logs at most two summary lines a minute, so ten in two hours is a trend.
    """
    log = ctx.snapshot.kernel_log
    if log is None:
        yield Finding.error(NODE, "kernel log was not collected",
                            ctx.snapshot.sources.get("kernel_log"))
        return
    if log.unknown and not log.lines_read:
        yield Finding.error(NODE, "kernel log unreadable", log.unknown)
        return
    since = ctx.now - ctx.params["window_s"]
    counts = dict.fromkeys((rule[0] for rule in _KERNEL_RULES), 0)
    for event in log.events:
        if event.time is not None and event.time < since:
            continue
        category = f"mce_{mce_severity(event)}" if event.kind == "mce" else event.kind
        if category in counts:
            counts[category] += 1
    found = False
    for category, param, status, message, action in _KERNEL_RULES:
        if counts[category] >= ctx.params[param]:
            found = True
            yield Finding(status, NODE, message, counts[category],
                          f"< {ctx.params[param]} in {ctx.params['window_s']} s", action)
    if not found:
        yield Finding.passed(NODE, "no machine checks, lockups or hung tasks logged", counts)


def _elapsed(ctx: CheckContext) -> float | None:
    previous = ctx.previous
    return None if previous is None else ctx.snapshot.taken_at - previous.taken_at


@check("host.dstate_processes", needs=("host",), rate=True,
       params={"min_stuck_s": 2.0, "fail_count": 3, "ignore": []},
       remedy="See what the processes wait on (cat /proc/PID/stack, wchan): a hung GPU "
              "driver (nvidia-smi in D state), a dead NFS/Lustre server or a failing disk. "
              "Processes in D state cannot be killed; a reboot clears them.",
       actions=(Action.INVESTIGATE,))
def dstate_processes(ctx: CheckContext) -> Iterator[Finding]:
    """Processes in uninterruptible sleep (D state) in two samples ``min_stuck_s`` apart.

    A process is the same one when both its pid and its start time match. Disk I/O puts
    processes in D state for milliseconds, so being there in both samples of a one-shot
    run (3 s apart by default) already means a wait of seconds: a warning. The default of
    2 s stays below that interval so the check works in one-shot runs. ``fail_count``
    stuck processes fail: at job start a node should be idle, and several stuck at once
    mean a shared resource (a driver, a filesystem) does not answer. ``ignore`` lists
    process names that idle in D state by design on some kernels or drivers.
    """
    host = _host(ctx)
    elapsed = _elapsed(ctx)
    before = ctx.previous.host if ctx.previous is not None else None
    if isinstance(host, Finding):
        yield host
    elif elapsed is None or before is None:
        yield Finding.skip(NODE, "needs an earlier sample of this node")
    elif elapsed < ctx.params["min_stuck_s"]:
        yield Finding.skip(NODE, "samples too close together to call a process stuck")
    elif "dstate" in host.unknown or "dstate" in before.unknown:
        yield Finding.error(NODE, "process list unreadable",
                            host.unknown.get("dstate") or before.unknown.get("dstate"))
    else:
        earlier = {(p.pid, p.start_ticks) for p in before.dstate}
        stuck = [{"pid": p.pid, "name": p.name, "wchan": p.wchan} for p in host.dstate
                 if (p.pid, p.start_ticks) in earlier and p.name not in ctx.params["ignore"]]
        expected = f"< {ctx.params['fail_count']} stuck for {round(elapsed, 1)} s"
        if len(stuck) >= ctx.params["fail_count"]:
            yield Finding.fail(NODE, "processes stuck in uninterruptible sleep", stuck,
                               expected)
        elif stuck:
            yield Finding.warn(NODE, "process stuck in uninterruptible sleep", stuck,
                               expected)
        else:
            yield Finding.passed(NODE, "no process stuck in uninterruptible sleep", [],
                                 expected)


_AER_TOTALS = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL",
               "fatal": "TOTAL_ERR_FATAL"}


def aer_growth(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Per-counter growth between two samples. A counter that went down was reset (the
    device was reset or its driver reloaded), so its growth is its new value."""
    growth = {}
    for name, value in after.items():
        old = before.get(name, 0)
        grew = value - old if value >= old else value
        if grew:
            growth[name] = grew
    return growth


def _aer_total(category: str, counters: Mapping[str, int], growth: Mapping[str, int]) -> int:
    """Growth of the kernel's TOTAL_ERR_* counter, or of the sum when a device lacks it."""
    total = _AER_TOTALS[category]
    return growth.get(total, 0) if total in counters else sum(growth.values())


@check("host.pcie_aer", needs=("pci",), rate=True,
       params={"nonfatal_fail": False, "correctable_per_min_warn": 10.0},
       remedy="Errors on one device: reseat it or its riser/cable, then RMA if they return. "
              "Fatal errors leave the device unusable until a reset: reboot.",
       actions=(Action.REBOOT, Action.INVESTIGATE))
def pcie_aer(ctx: CheckContext) -> Iterator[Finding]:
    """Growth of PCIe AER counters between two samples, per device.

    A fatal uncorrectable error leaves the link down until a reset: fail, reboot. A
    non-fatal uncorrectable error (completion timeout, poisoned TLP) was survived but
    lost a transaction: warn, or fail when ``nonfatal_fail``. Correctable errors were
    fixed by the link (replays); a healthy link has almost none, and DCGM allows about
    one replay a minute per lane, so ``correctable_per_min_warn`` = 10 per device warns
    well before an x16 link reaches DCGM's limit, with receiver errors counted too.
    """
    now, elapsed = ctx.snapshot.pci, _elapsed(ctx)
    before = ctx.previous.pci if ctx.previous is not None else None
    if now is None:
        yield Finding.error(NODE, "PCI devices were not collected", ctx.snapshot.sources.get("pci"))
        return
    if before is None or elapsed is None or elapsed <= 0:
        yield Finding.skip(NODE, "needs an earlier sample of this node")
        return
    earlier = {d.bdf: d for d in before if d.aer}
    pairs = [(earlier[d.bdf], d) for d in now if d.aer and d.bdf in earlier]
    if not pairs:
        yield Finding.skip(NODE, "no PCI device exposes AER counters")
        return
    findings = [f for old, new in pairs for f in _aer_device(ctx, old, new, elapsed)]
    yield from findings or [Finding.passed(NODE, "no PCIe AER errors between samples",
                                           len(pairs))]


def _aer_device(ctx: CheckContext, old: PciDevice, new: PciDevice,
                elapsed: float) -> Iterator[Finding]:
    growth = {cat: aer_growth(old.aer.get(cat, {}), new.aer.get(cat, {}))
              for cat in _AER_TOTALS}
    fatal, nonfatal, correctable = (_aer_total(cat, new.aer.get(cat, {}), growth[cat])
                                    for cat in ("fatal", "nonfatal", "correctable"))
    per_min = round(correctable * 60.0 / elapsed, 2)
    if fatal:
        yield Finding.fail(new.bdf, "PCIe fatal errors (AER) increased", growth["fatal"], 0,
                           Action.REBOOT)
    if nonfatal:
        status = Status.FAIL if ctx.params["nonfatal_fail"] else Status.WARN
        yield Finding(status, new.bdf, "PCIe non-fatal errors (AER) increased",
                      growth["nonfatal"], 0, Action.INVESTIGATE)
    if per_min > ctx.params["correctable_per_min_warn"]:
        yield Finding.warn(new.bdf, "PCIe correctable error rate (AER) high",
                           {"per_min": per_min, **growth["correctable"]},
                           f"<= {ctx.params['correctable_per_min_warn']}/min")
