"""host.kernel_errors: machine checks, lockups, hung tasks and uncorrectable PCIe errors
on an accelerator's path in the kernel log."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...agent.model.kernel import KernelEvent
from ...agent.model.pci import MELLANOX_VENDOR, PciDevice, normalize_bdf
from ..core.common import kernel_log_of
from ..core.finding import Action, Finding, Status
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE

_MCE_BANK = r"Bank \d+: ([0-9a-f]{16})\b"


def mce_severity(event: KernelEvent) -> str | None:
    """``uncorrected``, ``corrected``, or None for a continuation line of an MCE dump.

    A dump header (``CPU 3: Machine Check: 0 Bank 5: be00000000800400``) carries the
    bank's MCi_STATUS; bit 61 (UC) says the error was not corrected (Intel SDM vol. 3B
    15.3.2.2, AMD APM vol. 2 9.3). The kernel's own summaries say which they are:
    ``Machine check events logged`` after corrected errors (CMCI/polling),
    ``Uncorrected hardware memory error in user-access`` after a poisoned page was hit.
    The RIP/TSC/PROCESSOR lines that follow a header repeat it and are not counted.
    """
    bank = re.search(_MCE_BANK, event.message, re.IGNORECASE)
    if bank:
        return "uncorrected" if int(bank.group(1), 16) >> 61 & 1 else "corrected"
    if re.search(r"Uncorrected hardware memory error|Machine Check Exception", event.message):
        return "uncorrected"
    if "Machine check events logged" in event.message:
        return "corrected"
    return None


def aer_severity(event: KernelEvent) -> str:
    """``fatal``, ``nonfatal`` or ``corrected`` for an ``aer`` event.

    aer.c spells the severity "Uncorrected (Fatal)" in older kernels and "Uncorrectable
    (Fatal)" in current ones, in both the source port's "error received" line and the
    device's "PCIe Bus Error: severity=..." line. err.c's "can't recover (no
    error_detected callback)" says only that the device's driver takes no part in
    recovery, after a fatal or a non-fatal error alike: alone it is non-fatal, and the
    severity line of the same device, judged beside it, makes it fatal.
    """
    message = event.message
    if re.search(r"Uncorrect(?:ed|able) \(Fatal\)", message):
        return "fatal"
    if "can't recover" in message or re.search(r"Uncorrect(?:ed|able) \(Non-Fatal\)",
                                               message):
        return "nonfatal"
    return "corrected"


def accelerator_paths(pci: list[PciDevice] | None) -> dict[str, str] | None:
    """Bus id -> the GPU, NVSwitch or NIC whose path it is on (the device itself or a
    bridge above it); None when the PCI tree was not read, so every device counts."""
    if pci is None:
        return None
    paths: dict[str, str] = {}
    for device in pci:
        nic = device.vendor == MELLANOX_VENDOR and device.pci_class >> 16 == 0x02
        if not (device.is_nvidia_gpu or device.is_nvswitch or nic):
            continue
        for bdf in (*device.path, device.bdf):
            if (address := normalize_bdf(bdf)) is not None:
                paths.setdefault(address, device.bdf)
    return paths


def _aer_findings(events: list[KernelEvent], paths: dict[str, str] | None,
                  ) -> Iterator[Finding]:
    """One finding per device with uncorrectable AER lines on an accelerator's path.

    A fatal error leaves the link down until a reset (fail, reboot); a non-fatal one
    lost a transaction the device survived (warn), as host.pcie_aer judges the same
    errors from the counters, which need two samples and so never run at ``quick``.
    Corrected errors are that check's business (a rate).
    """
    worst: dict[str, tuple[str, list[str]]] = {}
    for event in events:
        severity = aer_severity(event)
        where = normalize_bdf(event.device) or NODE
        if severity == "corrected" or (paths is not None and where != NODE
                                       and where not in paths):
            continue
        old, raws = worst.get(where, (severity, []))
        raws.append(event.raw)
        worst[where] = ("fatal" if "fatal" in (old, severity) else severity, raws)
    for where, (severity, raws) in sorted(worst.items()):
        observed = {"count": len(raws), "last": raws[-1][:200]}
        if paths is not None and where in paths:
            observed["path_of"] = paths[where]
        if severity == "fatal":
            yield Finding.fail(where, "PCIe fatal uncorrectable error (AER) in the kernel log",
                               observed, "none", Action.REBOOT)
        else:
            yield Finding.warn(where, "PCIe non-fatal uncorrectable error (AER) in the kernel "
                                      "log", observed, "none", Action.INVESTIGATE)


# (category, its KernelErrorsParams threshold, status, message, action), in the order
# findings are listed.
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


@parameters
class KernelErrorsParams(Params):
    window_s: int = param(7200, ge=0, doc="how far back an event counts, in seconds")
    mce_uncorrected_fail: int = param(
        1, ge=1, doc="uncorrected machine checks in the window that fail (data was lost)")
    hard_lockup_fail: int = param(1, ge=1, doc="hard lockups in the window that fail")
    soft_lockup_warn: int = param(1, ge=1, doc="soft lockups in the window that warn")
    hung_task_warn: int = param(1, ge=1, doc="hung tasks in the window that warn")
    nmi_warn: int = param(1, ge=1, doc="hardware NMIs in the window that warn")
    mce_corrected_warn: int = param(
        10, ge=1, doc="corrected machine checks in the window that warn: the kernel logs "
        "at most two summary lines a minute, so ten in two hours is a trend")


@check("host.kernel_errors", needs=("kernel_log", "pci"), params=KernelErrorsParams,
       remedy="Read the kernel log around the events. Machine checks: find the DIMM or CPU "
              "with rasdaemon/mcelog or the BMC event log. A hard lockup leaves the kernel "
              "in doubt: reboot. Hung tasks and soft lockups: find the driver or filesystem "
              "that stalls (the stack trace follows the message). A fatal PCIe (AER) error "
              "on a GPU's, NIC's or NVSwitch's path leaves it unusable until a reset: "
              "reboot, then reseat the device or riser if it returns; a non-fatal one: "
              "watch host.pcie_aer's counters.",
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
    Uncorrectable PCIe errors (AER) on a GPU's, NIC's or NVSwitch's path, by the bus id
    the line names and the node's PCI tree: fatal fails (reboot), non-fatal warns.
    """
    log = kernel_log_of(ctx.snapshot)
    if isinstance(log, Finding):
        yield log
        return
    params = KernelErrorsParams.of(ctx)
    since = ctx.now - params.window_s
    counts = dict.fromkeys((rule[0] for rule in _KERNEL_RULES), 0)
    recent = [e for e in log.events if e.time is None or e.time >= since]
    for event in recent:
        category = f"mce_{mce_severity(event)}" if event.kind == "mce" else event.kind
        if category in counts:
            counts[category] += 1
    aer = [e for e in recent if e.kind == "aer"]
    found = False
    for finding in _aer_findings(aer, accelerator_paths(ctx.snapshot.pci)):
        found = True
        yield finding
    for category, name, status, message, action in _KERNEL_RULES:
        threshold: int = getattr(params, name)
        if counts[category] >= threshold:
            found = True
            yield Finding(status, NODE, message, counts[category],
                          f"< {threshold} in {params.window_s} s", action)
    if not found:
        yield Finding.passed(NODE, "no machine checks, lockups or hung tasks logged", counts)
