"""host.cper: APEI/GHES hardware error records (UEFI CPER) in the kernel log, judged by
the severity the firmware gave them.

On Grace (GB200/GB300 trays) CPU and memory errors are handled firmware first and reach
Linux only as these records; the collector (agent/collectors/kernel_log.py) groups each
record's ``{N}[Hardware Error]:`` lines into one ``cper`` event. The wording read here
is printed by drivers/firmware/efi/cper.c (torvalds/linux): cper_estatus_print()
"event severity: %s" from severity_strs {"recoverable", "fatal", "corrected", "info"};
cper_estatus_print_section() "section_type: memory error" / "ARM processor error" /
"general processor error" / "PCIe error"; cper_print_mem() "physical_address: 0x%016llx"
and cper_mem_err_location()'s "node:%d card:%d module:%d ..." line;
cper_dimm_err_location() "DIMM location: %s %s"; cper_print_proc_generic()
"processor_id: 0x%016llx"; cper_print_pcie() "device_id: %04x:%02x:%02x.%x"; and
cper-arm.c cper_print_proc_arm() "Multiprocessor Affinity Register (MPIDR): 0x%016llx"
and "physical fault address: 0x%016llx".
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from ...agent.model.kernel import KernelEvent, KernelLog
from ...agent.model.record import record
from ..core.common import kernel_log_of
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE

_SEVERITY_RE = re.compile(r"^event severity: (\w+)$", re.M)
_SECTION_RE = re.compile(r"^section[_ ]type: (.{1,80})$", re.M)
# cper_mem_err_location(): "name:value " pairs, node/card/module first when valid.
_MEM_FIELD_RE = re.compile(r"\b(node|card|module|rank|device):(\d{1,6})\b")
_MEM_LINE_RE = re.compile(r"^(?:node|card|module|rank|bank|device):\d", re.M)
_PA_RE = re.compile(r"^physical_address: (0x[0-9a-f]{1,16})$", re.M)
_DIMM_RE = re.compile(r"^DIMM location: ([\x20-\x7e]{1,64})$", re.M)
_MPIDR_RE = re.compile(r"^Multiprocessor Affinity Register \(MPIDR\): 0x([0-9a-f]{1,16})$",
                       re.M)
_FAULT_PA_RE = re.compile(r"^physical fault address: (0x[0-9a-f]{1,16})$", re.M)
_PROC_ID_RE = re.compile(r"^processor_id: 0x([0-9a-f]{1,16})$", re.M)
_PCIE_DEV_RE = re.compile(
    r"^device_id: ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$", re.M)

# ghes.c ghes_print_estatus(): "Not more than 2 messages every 5 seconds", one ratelimit
# for corrected and one for uncorrected records, and ghes_estatus_cached() skips a record
# identical to one printed moments before: the log holds at least, not exactly, what the
# firmware reported.
LOWER_BOUND = ("the kernel prints at most 2 records per 5 s of each class and skips "
               "repeats (drivers/acpi/apei/ghes.c), so these are lower bounds")


@record(frozen=True)
class CperRecord:
    """What one record says: its severity, first section type, where it happened as a
    component (one word), and the address or module details that go with it."""

    severity: str
    section: str
    component: str
    detail: dict[str, str]


def _hex(text: str) -> str:
    return f"0x{int(text, 16):x}"


def read_record(event: KernelEvent) -> CperRecord:
    """The severity and location a ``cper`` event's lines give, read with patterns that
    take digits and hex only, so a hostile line cannot put anything else in a component."""
    text = event.message
    severity = m[1] if (m := _SEVERITY_RE.search(text)) else "unknown"
    section = m[1].strip() if (m := _SECTION_RE.search(text)) else "unknown"
    detail: dict[str, str] = {}
    component = NODE
    if section == "memory error":
        line = _MEM_LINE_RE.search(text)
        fields = _MEM_FIELD_RE.findall(text[line.start():].split("\n", 1)[0] if line else "")
        parts = [f"{name}{value}" for name, value in fields if name in ("node", "card",
                                                                         "module")]
        component = ".".join(["memory", *parts])
        detail.update((name, value) for name, value in fields)
        if m := _PA_RE.search(text):
            detail["physical_address"] = m[1]
        if m := _DIMM_RE.search(text):
            detail["dimm"] = m[1].strip()
    elif section == "ARM processor error":
        if m := _MPIDR_RE.search(text):
            component = f"cpu.mpidr_{_hex(m[1])}"
        if m := _FAULT_PA_RE.search(text):
            detail["physical_address"] = m[1]
    elif section == "general processor error":
        if m := _PROC_ID_RE.search(text):
            component = f"cpu.id_{_hex(m[1])}"
    elif section == "PCIe error" and (m := _PCIE_DEV_RE.search(text)):
        component = m[1]
    return CperRecord(severity, section, component, detail)


@parameters
class CperParams(Params):
    window_s: int = param(7200, ge=0, doc="how far back a record counts, in seconds")
    corrected_warn_per_day: float = param(
        50.0, ge=0.001, doc="corrected records per day that warn: rasdaemon's default for "
        "offlining a page (PAGE_CE_THRESHOLD=50 per PAGE_CE_REFRESH_CYCLE=24h, "
        "misc/rasdaemon.env), taken for the whole node")
    previous_boot_s: int = param(
        43200, ge=0, doc="how long after this boot began a fatal or recoverable record of "
        "the previous boot (read by the agent at its start) still counts, in seconds, "
        "unless cleared with clusterdiag agent --clear")


def _observed(records: list[tuple[KernelEvent, CperRecord]]) -> dict[str, object]:
    last_event, last = records[-1]
    return {"records": f"at least {len(records)}", "section": last.section, **last.detail,
            "last": last_event.message.replace("\n", " | ")[:240]}


@check("host.cper", needs=("kernel_log",), params=CperParams,
       remedy="Read the whole record in the kernel log (journalctl -k, or -b -1 for the boot "
              "a fatal error ended) and the BMC's event log for the same time. A fatal "
              "record names the memory module or CPU that failed: take the tray out of "
              "service and have the vendor check that part; a recoverable one lost data a "
              "process saw (it was killed or the page poisoned); many corrected ones "
              "foretell a failure of the location they name.",
       actions=(Action.INVESTIGATE,))
def cper(ctx: CheckContext) -> Iterator[Finding]:
    """Hardware error records logged within ``window_s``, by their ``event severity``.

    A fatal record fails on the location it names (the memory node/card/module, or the
    CPU by its MPIDR): the firmware could not contain the error, and the kernel usually
    panics on one (ghes.c __ghes_panic), so the record may sit in the boot it ended. A
    recoverable record warns: data was lost but contained. Corrected records are judged
    as a rate over the window against rasdaemon's default page threshold. Counts are
    lower bounds: the kernel rate-limits and de-duplicates these records.

    A record of the boot that ended counts "in the previous boot" for
    ``previous_boot_s`` after this boot began: fatal fails, recoverable warns. The
    firmware hands such records to this boot (ACPI BERT, printed in this boot's kernel
    log, so ``run`` and the prolog see them too); the agent also reads the previous boot's
    journal at its start, where it is persistent, and a record found there lasts until
    ``clusterdiag agent --clear ID`` clears it.
    """
    log = kernel_log_of(ctx.snapshot)
    if isinstance(log, Finding):
        yield log
        return
    params = CperParams.of(ctx)
    since = ctx.now - params.window_s
    by_severity: dict[str, dict[str, list[tuple[KernelEvent, CperRecord]]]] = {}
    for event in log.events:
        if event.kind != "cper" or event.previous_boot or (
                event.time is not None and event.time < since):
            continue
        read = read_record(event)
        by_severity.setdefault(read.severity, {}).setdefault(
            read.component, []).append((event, read))
    found = False
    for component, records in sorted(by_severity.get("fatal", {}).items()):
        found = True
        yield Finding.fail(component, "fatal hardware error record (APEI/CPER) in the "
                                      "kernel log", _observed(records), "none",
                           Action.INVESTIGATE)
    for component, records in sorted(by_severity.get("recoverable", {}).items()):
        found = True
        yield Finding.warn(component, "recoverable hardware error record (APEI/CPER) in "
                                      "the kernel log", _observed(records), "none",
                           Action.INVESTIGATE)
    corrected = by_severity.get("corrected", {})
    count = sum(len(records) for records in corrected.values())
    per_day = count * 86400 / params.window_s if params.window_s else 0.0
    if count and per_day >= params.corrected_warn_per_day:
        found = True
        busiest = sorted(corrected, key=lambda c: -len(corrected[c]))[:5]
        yield Finding.warn(
            NODE, "many corrected hardware error records (APEI/CPER) in the kernel log",
            {"records": f"at least {count} in {params.window_s} s",
             "per_day": round(per_day, 1),
             "locations": {c: len(corrected[c]) for c in busiest}, "note": LOWER_BOUND},
            f"< {params.corrected_warn_per_day:g} per day", Action.INVESTIGATE)
    judged = {c for s in ("fatal", "recoverable") for c in by_severity.get(s, {})}
    for finding in _previous_boot(ctx, log, params, judged):
        found = True
        yield finding
    if not found:
        counts: dict[str, object] = {s: sum(len(r) for r in c.values())
                                     for s, c in sorted(by_severity.items())}
        if log.previous_boot is not None:
            counts["previous_boot"] = log.previous_boot.read
        yield Finding.passed(NODE, "no fatal or recoverable hardware error records (APEI/"
                                   "CPER), corrected ones below the rate that warns", counts)


def _at(when: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)) if when else "an unknown time"


def _previous_boot(ctx: CheckContext, log: KernelLog, params: CperParams,
                   judged: set[str]) -> Iterator[Finding]:
    """The previous boot's fatal (fail) and recoverable (warn) records, for
    ``previous_boot_s`` after this boot began (always, where the boot time is unknown), on
    a location this boot's log does not already judge: those the firmware reported at this
    boot (BERT, in this boot's log: every reader sees them) and those the agent read from
    the journal at its start and no one cleared (agent/collectors/previous_boot.py)."""
    kept = [(r.id, r.event) for r in log.previous_boot.records] if log.previous_boot else []
    # The firmware's own account (BERT) first: a journal record of the same location,
    # which can be cleared, stands for it.
    found = [(None, e) for e in log.events if e.kind == "cper" and e.previous_boot] + kept
    if not found:
        return
    boot = ctx.snapshot.boot_time()
    if boot is not None and ctx.now - boot > params.previous_boot_s:
        return
    newest: dict[tuple[str, str], tuple[str | None, KernelEvent, CperRecord]] = {}
    for kept_id, kept_event in found:
        read = read_record(kept_event)
        if read.severity in ("fatal", "recoverable") and read.component not in judged:
            newest[(read.severity, read.component)] = (kept_id, kept_event, read)
    for (severity, component), (event_id, event, read) in sorted(newest.items()):
        observed: dict[str, object] = {**_observed([(event, read)]), "records": "at least 1"}
        if event_id is None:
            observed["reported_by"] = "firmware at this boot (ACPI BERT)"
            text = (f"{severity} hardware error record (APEI/CPER) in the previous boot "
                    "(reported by firmware at this boot)")
        else:
            observed.update(event=event_id, clear_with=f"clusterdiag agent --clear {event_id}")
            text = (f"{severity} hardware error record (APEI/CPER) in the previous boot (at "
                    f"{_at(event.time)})")
        if severity == "fatal":
            yield Finding.fail(component, text, observed, "none", Action.INVESTIGATE)
        elif component not in {c for s, c in newest if s == "fatal"}:
            yield Finding.warn(component, text, observed, "none", Action.INVESTIGATE)
