"""Read the kernel log and pick out the lines the checks judge: Xids, SXids and a few others.

The same Xid line reaches us in many wrappers: a bare ``/dev/kmsg`` record, ``dmesg`` with
``[uptime]``, ``dmesg -T`` (ctime), ``dmesg --time-format iso`` (optionally with
``--decode``'s ``kern  :warn  :``), syslog and ``journalctl`` (``Mon DD hh:mm:ss host
kernel:``, the month in whatever locale the box runs). Instead of one regex per wrapper,
each line is split into (timestamp prefix, kernel message) and the message is matched by
driver-specific patterns. The formats come from the NVIDIA Xid catalog, gpud's xid/kmsg.go
and the open-source nvswitch driver; the real lines the tests hold us to are under
``tests/fixtures/real/xid`` and ``tests/fixtures/kernel_log``.

This module is on the Slurm prolog path, so it imports only the standard library.
Nothing here raises on bad input: undecodable bytes are replaced, lines that match
nothing are skipped, and a source that cannot be read is recorded in
``KernelLog.unknown``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import BinaryIO, TypeVar

from ..base.lazy_re import LazyPattern
from ..model.kernel import KernelEvent, KernelLog, SxidEvent, XidEvent
from ..model.pci import normalize_bdf
from ..model.record import field, record
from ..read.sysfs import open_regular, raise_if_exhausted

# domain:bus:device, domain 4 hex digits on x86 and up to 8 elsewhere (gpud's GB200
# xid tests show PCI:0008:01:00).
_BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_BDF_FN = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

# --- prefixes --------------------------------------------------------------------------
# /dev/kmsg: "PRIO,SEQ,USEC_SINCE_BOOT,FLAGS[,...];MESSAGE" (Documentation/ABI/testing/dev-kmsg).
_KMSG_RE = LazyPattern(r"\d+,\d+,(?P<usec>\d+),[^;]*;")
# `dmesg -r` keeps the console priority: "<4>[  12.345678] ..."; RFC 5424 syslog adds its
# version: "<4>1 2026-04-22T21:25:20.466Z host kernel - - - ...".
_PRIO_RE = LazyPattern(r"<\d+>(?P<v5424>1 )?")
# RFC 5424 after its timestamp: HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA.
_RFC5424_TAIL_RE = LazyPattern(r"\S+ \S+ \S+ \S+ (?:-|(?:\[[^\]]*\])+) ?")
# `dmesg --decode`: "kern  :warn  : ".
_DECODE_RE = LazyPattern(r"[a-z]+ *:[a-z]+ *: ")
_ISO_BODY = (
    r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T ](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d\d:?\d\d)?"
)
# `dmesg --time-format iso` (comma fraction), journalctl -o short-iso(-precise), RFC 3339
# syslog, a container runtime's log ("<iso> stdout F ", the stream tag dropped).
_ISO_RE = LazyPattern(_ISO_BODY + r"\s+(?:std(?:out|err) [FP] )?")
# Talos (`talosctl dmesg`): "HOST: kern: err: [2026-04-22T21:25:20.466440686Z]: ".
_TALOS_RE = LazyPattern(r"(?:\S+: )?[a-z]+: +[a-z]+: +\[" + _ISO_BODY + r"\]: ")
# `dmesg -T`: "[Sun Feb 23 16:24:18 2025] " (with -d: "[... 2025 <    0.000844>] ").
_CTIME_RE = LazyPattern(
    r"\[[A-Z][a-z]{2} (?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) "
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) (?P<y>\d{4})(?: <\s*\d+\.\d+>)?\]\s*"
)
# `dmesg -H`/`-e`: "[Apr22 21:25] " on the first line of a minute, then "[  +0.000844] ".
_RELTIME_RE = LazyPattern(
    r"\[(?P<mon>[A-Z][a-z]{2})(?P<d>\d{1,2}) (?P<h>\d\d):(?P<mi>\d\d)\]\s*")
_DELTA_RE = LazyPattern(r"\[\s*\+(?P<delta>\d+\.\d+)\]\s*")
# klog, as node-problem-detector's pod log prints: "I0422 21:25:20.466440       1 x.go:160] ".
_KLOG_RE = LazyPattern(
    r"[IWEF](?P<mo>\d\d)(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)?"
    r" +\d+ [^\s\]]+:\d+\] ")
# syslog / journalctl short: "Apr  6 15:47:19 host kernel: " -- any locale's month ("kwi").
# The kernel tag is tried first so "Apr  6 15:47:19 kernel: NVRM: ..." (no host) keeps its
# "NVRM:"; other tags (a logger-written line) need the host.
_SYSLOG_RE = LazyPattern(
    r"(?P<mon>[^\W\d_]{3,5}\.?) +(?P<d>\d{1,2}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?:\.\d+)? +(?:(?:\S+ )?kernel: |\S+ [^\s:\[]+(?:\[\d+\])?: )"
)
# After an ISO stamp only a kernel tag is stripped, so "watchdog: BUG: ..." stays whole.
_KERNEL_TAG_RE = LazyPattern(r"(?:\S+ )?kernel: ")
# `dmesg`: "[  123.456789] "; `dmesg -d`: "[  123.456789 <    0.000844>] ".
_UPTIME_RE = LazyPattern(r"\[\s*(?P<up>\d+\.\d+)(?: <\s*\d+\.\d+>)?\]\s*")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

# --- NVIDIA ----------------------------------------------------------------------------
# gpud's Xid regex (xid/kmsg.go), with the bdf allowed a function and the MIG instance kept;
# a code cut off by truncation ("79>") has no comma after it and is not trusted.
# An address elided to "..." (as some logs and bug reports carry it) still names an Xid:
# its bdf group is empty and the check judges it on an unidentified GPU.
_XID_RE = LazyPattern(
    r"NVRM: Xid \((?:PCI:)?(?:(?P<bdf>" + _BDF + r")|\.\.\.|\u2026)"
    r"(?: GPU-I:(?P<gi>\d+))?[^)]*\): "
    r"(?P<xid>\d+)(?:, ?(?P<rest>.*))?$"
)
_FIELDS_RE = LazyPattern(
    r"pid=(?P<pid>'<unknown>'|<unknown>|\d+)"
    r"(?:, name=(?P<name><unknown>|[^,]*))?"
    r"(?:, (?P<msg>.*))?$"
)
# Xid 79 printed without an Xid token (gpud PR #1209; NVSentinel issue #155): one line,
# or three records "The NVIDIA GPU <bdf>" / "(PCI ID: ...) installed in this system has" /
# "fallen off the bus and is not responding to commands."
_FALLEN_ONE_RE = LazyPattern(
    r"NVRM: GPU (?P<bdf>" + _BDF + r"): (?P<msg>GPU has fallen off the bus.*)")
_FALLEN_HEAD_RE = LazyPattern(r"NVRM: The NVIDIA GPU (?P<bdf>" + _BDF + r")")
_FALLEN_TAIL = "fallen off the bus"
_FALLEN_SPAN = 3  # records the three-record form may take, counted from its head
_NVRM_PREFIX_RE = LazyPattern(r"NVRM: ?")
_SXID_RE = LazyPattern(
    r"(?P<dev>nvidia-nvswitch\d+): SXid \((?:PCI:)?(?P<bdf>" + _BDF + r")\): "
    r"(?P<sxid>\d+)(?:, ?(?P<msg>.*))?$"
)
# journalctl/less cut a long line and mark it; the cut field cannot be trusted.
_CUT_MARKS = (">", "\u2026")

# --- other kernel events ---------------------------------------------------------------
# (kind, pattern). First match wins, so the specific mlx5 lines precede mlx5_health.
_EVENT_PATTERNS: tuple[tuple[str, LazyPattern], ...] = (
    # arch/x86/kernel/cpu/mce: "mce: [Hardware Error]: Machine check events logged".
    ("mce", LazyPattern(r"\bmce: (?:\[Hardware Error\]|Uncorrected hardware memory error)"
                       r"|Machine check events logged")),
    # kernel/hung_task.c: "INFO: task %s:%d blocked for more than %ld seconds."
    ("hung_task", LazyPattern(r"INFO: task .+:\d+ blocked for more than \d+ seconds")),
    # kernel/watchdog.c: "watchdog: BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]"
    ("soft_lockup", LazyPattern(r"BUG: soft lockup - CPU#\d+ stuck for")),
    # kernel/watchdog(_perf).c: "Watchdog detected hard LOCKUP on cpu %d"; panic variant.
    ("hard_lockup", LazyPattern(r"Watchdog detected hard LOCKUP on cpu \d+"
                               r"|Kernel panic - not syncing: Hard LOCKUP")),
    # arch/x86/kernel/nmi.c: unknown_nmi_error, pci_serr_error, io_check_error.
    ("nmi", LazyPattern(r"Uhhuh\. NMI received for unknown reason"
                       r"|NMI: (?:PCI system error \(SERR\)|IOCK error)")),
    # The NVIDIA driver does not log a GPU reset as such. What shows one happened: the
    # kernel module being loaded again ("NVRM: loading NVIDIA UNIX ... Kernel Module") and
    # NVSentinel's reset acknowledgement ("GPU reset executed: GPU-<uuid>", written with
    # logger by its reset script). "NVRM: GPU at PCI:...: GPU-<uuid>" is NOT one: the
    # driver prints it as the header of a GPU's first Xid report (raw_logs/
    # gpud_dmesg-with-xid-119.log; NVSentinel uses it only to map bus id -> UUID).
    # kernel-open/nvidia/nv.c nvidia_init_module: "NVRM: The NVIDIA probe routine failed
    # for %d device(s).": a reload beside it did not bring every GPU back.
    ("gpu_probe_failed", LazyPattern(r"NVRM: The NVIDIA probe routine failed for \d+ dev")),
    ("gpu_reset", LazyPattern(r"NVRM: loading NVIDIA UNIX .*Kernel Module"
                             r"|GPU reset executed: (?P<uuid>GPU-[0-9a-fA-F-]+)")),
    # drivers/pci/hotplug/pciehp: "Slot(%s): Power fault"; mlx5 events.c mlx5_pcie_event.
    ("pcie_slot_power", LazyPattern(r"Slot\([^)]*\): Power fault"
                                   r"|Detected insufficient power on the PCIe slot")),
    # mlx5 events.c: port_module "Port module event[error]: module %u, %s, %s" with error
    # "High Temperature"; temp_warn "High temperature on sensors with bit set %llx %llx".
    ("module_temperature", LazyPattern(r"Port module event.*High Temperature"
                                      r"|High temperature on sensors")),
    # mlx5 health.c / cmd.c: lost heartbeat, fatal sensors, syndromes, recovery, cmd leak.
    # mlx5 main.c: the device failed to load. The wording moved between kernels:
    # "mlx5_load_one failed with error code %d" (probe_one, older), "mlx5_init_one failed
    # with error code %d" (newer, both behind mlx5_core_err's "func:line:(pid N): "), and the
    # driver core's drivers/base/dd.c "%s: probe of %s failed with error %d" (before 5.x)
    # or "probe with driver %s failed with error %d" (dev_err, newer).
    ("mlx5_probe_failed", LazyPattern(
        r"mlx5_(?:load|init)_one failed with error code -?\d+"
        r"|mlx5_core: probe of \S+ failed with error -?\d+"
        r"|probe with driver mlx5_core failed with error -?\d+")),
    ("mlx5_health", LazyPattern(
        r"mlx5.*(?:health compromised|Fatal error \d+ detected|synd 0x[0-9a-fA-F]+:"
        r"|unrecoverable hardware error|health recovery|handling bad device"
        r"|Driver is in error state|Will cause a leak of a command resource)")),
    # drivers/pci/pcie/aer.c: "AER: [Multiple ]<severity> error received: <bdf>" (severity
    # "Corrected", "Uncorrected (Non-Fatal)", "Uncorrected (Fatal)") and, in current
    # kernels (aer_print_port_info), "AER: [Multiple ]<severity> error message received
    # from <bdf>" with "Correctable", "Uncorrectable (Non-Fatal)", "Uncorrectable (Fatal)";
    # aer_print_error's "PCIe Bus Error: severity=<severity>, type=<layer>, (<agent>)" on
    # the device itself (with or without the "AER: " prefix, by kernel); err.c's
    # "AER: can't recover (no error_detected callback)" for a driver (nvidia) that cannot
    # recover its device.
    ("aer", LazyPattern(
        r"AER: (?:Multiple )?(?:Corrected|Correctable|Uncorrect(?:ed|able) \((?:Non-)?Fatal\)) "
        r"error (?:message )?received(?: from)?:? ?(?P<src>" + _BDF_FN + r")?"
        r"|PCIe Bus Error: severity=|AER: can't recover")),
)
_DEVICE_RE = LazyPattern(r"(?<![0-9a-fA-F:])(?P<bdf>" + _BDF_FN + r")")

# --- APEI/GHES hardware error records (CPER) ---------------------------------------------
# Firmware-first errors (Grace's CPU and memory errors among them) reach the kernel as
# UEFI CPER records, which drivers/acpi/apei/ghes.c __ghes_print_estatus() prints one
# printk per line, every line prefixed "{%u}" HW_ERR: a per-boot record counter and
# include/linux/printk.h's HW_ERR "[Hardware Error]: ". Its first line is "Hardware error
# from APEI Generic Hardware Error Source: %d"; drivers/firmware/efi/cper.c
# cper_estatus_print() and cper_estatus_print_section() (and cper-arm.c
# cper_print_proc_arm()) print the rest: "event severity: %s", " Error %d, type: %s",
# "  section_type: ...", and the section's fields. One record is one "cper" event whose
# message holds its lines' texts, one per line, so the check reads severity and location.
_CPER_RE = LazyPattern(r"\{(?P<seq>\d+)\}\[Hardware Error\]: ?(?P<text>.*)$")
_CPER_HEAD = "Hardware error from APEI Generic Hardware Error Source"
# A record of the boot before, which the kernel could not log (a fatal one panics it:
# ghes.c __ghes_panic), reaches it at the next boot through the firmware's Boot Error
# Record Table: drivers/acpi/apei/bert.c bert_print_all() prints "BERT: Error records from
# previous boot:" once (pr_info_once, pr_fmt "BERT: "), then each record with
# cper_estatus_print(KERN_INFO HW_ERR, ...): the same lines as above with no "{%u}"
# counter and no header, each record starting with cper.c's "It has been corrected by h/w
# and requires no further action" (corrected only) or "event severity: %s". It ends with
# "BERT: Total records found: %d" (or "BERT: [Hardware Error]: Skipped ..."), which any
# line not of the block also ends. Such a record is a ``cper`` event marked
# ``previous_boot``; only HW_ERR at the start of a message is taken, so mce's
# "mce: [Hardware Error]: ..." is never one.
_BERT_HEAD = "BERT: Error records from previous boot:"
_BERT_RE = LazyPattern(r"\[Hardware Error\]: ?(?P<text>.*)$")
_BERT_CORRECTED = "It has been corrected by h/w and requires no further action"
_BERT_SEVERITY = "event severity:"
# The lines one record keeps: the header, severity and section lines and a memory or ARM
# processor section's location come within the first twenty; what follows is register
# context and vendor hex dumps, dropped so a firmware's long record stays bounded.
CPER_MAX_LINES = 64


# --- one line --------------------------------------------------------------------------


@record
class _Stamp:
    """Where a line's kernel message starts, and the times its prefix carried: a wall time,
    the kernel's uptime, or (``dmesg -H``) the seconds since the line before."""

    message: str
    time: float | None = None
    uptime_s: float | None = None
    delta_s: float | None = None


@cache
def _datetime() -> ModuleType:
    """``datetime``, imported when a line first prints a wall time: a node's own log
    (/dev/kmsg) counts from boot, and the import costs the prolog ~2 ms."""
    import datetime  # datetime is off the prolog's path until a line prints a wall time

    return datetime


def _wall_time(year: int, month: int, day: int, clock: tuple[int, int, int],
               frac: str | None = None, tz: str | None = None) -> float | None:
    """Epoch seconds of a printed wall time; local time when no zone is printed (what
    ``dmesg -T`` and syslog print). None for an impossible date rather than an error."""
    dt = _datetime()
    datetime, timedelta, timezone = dt.datetime, dt.timedelta, dt.timezone
    try:
        stamp = datetime(year, month, day, *clock)
        if frac:
            stamp += timedelta(microseconds=int(frac[:6].ljust(6, "0")))
        if tz:
            offset = timedelta(0)
            if tz != "Z":
                digits = tz[1:].replace(":", "")
                offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
                if tz[0] == "-":
                    offset = -offset
            stamp = stamp.replace(tzinfo=timezone(offset))
        return float(stamp.timestamp())
    except (ValueError, OverflowError):
        return None


def _yearless_time(month: int | None, day: int, clock: tuple[int, int, int],
                   now: float) -> float | None:
    """Syslog, klog and ``dmesg -H`` omit the year: take ``now``'s, or the one before when
    that would put the line more than a day in the future (a December line read in
    January)."""
    if month is None:  # a localised month name ("kwi"): placed from the lines around it
        return None
    year = time.localtime(now).tm_year
    stamp = _wall_time(year, month, day, clock)
    if stamp is not None and stamp > now + 86400:
        stamp = _wall_time(year - 1, month, day, clock)
    return stamp


def _clock(match: re.Match[str]) -> tuple[int, int, int]:
    return int(match["h"]), int(match["mi"]), int(match["s"])


def _iso_time(m: re.Match[str]) -> float | None:
    return _wall_time(int(m["y"]), int(m["mo"]), int(m["d"]), _clock(m), m["frac"], m["tz"])


def _wall_prefix(text: str, pos: int, now: float, rfc5424: bool) -> tuple[float | None, int]:
    """The wall time a shipper's prefix at ``pos`` prints, and where the prefix ends."""
    if m := _ISO_RE.match(text, pos):
        pos = m.end()
        if rfc5424 and (t := _RFC5424_TAIL_RE.match(text, pos)):
            return _iso_time(m), t.end()
        if k := _KERNEL_TAG_RE.match(text, pos):
            pos = k.end()
        return _iso_time(m), pos
    if m := _TALOS_RE.match(text, pos):
        return _iso_time(m), m.end()
    if m := _CTIME_RE.match(text, pos):
        month = _MONTHS.get(m["mon"])
        wall = _wall_time(int(m["y"]), month, int(m["d"]), _clock(m)) if month else None
        return wall, m.end()
    if m := _RELTIME_RE.match(text, pos):
        clock = (int(m["h"]), int(m["mi"]), 0)
        return _yearless_time(_MONTHS.get(m["mon"]), int(m["d"]), clock, now), m.end()
    if m := _KLOG_RE.match(text, pos):
        return _yearless_time(int(m["mo"]), int(m["d"]), _clock(m), now), m.end()
    if m := _SYSLOG_RE.match(text, pos):
        return _yearless_time(_MONTHS.get(m["mon"]), int(m["d"]), _clock(m), now), m.end()
    if k := _KERNEL_TAG_RE.match(text, pos):
        return None, k.end()
    return None, pos


def _strip_prefix(line: str, boot_time: float | None, now: float) -> _Stamp:
    """Split a line into its timestamp/host prefix and the kernel message."""
    text = line.strip()
    kmsg = _KMSG_RE.match(text)
    if kmsg:
        uptime = int(kmsg["usec"]) / 1e6
        wall = boot_time + uptime if boot_time is not None else None
        return _Stamp(text[kmsg.end():], wall, uptime)
    stamp = _Stamp(text)
    pos = 0
    rfc5424 = False
    if m := _PRIO_RE.match(text):
        pos, rfc5424 = m.end(), m["v5424"] is not None
    if m := _DECODE_RE.match(text, pos):
        pos = m.end()
    stamp.time, pos = _wall_prefix(text, pos, now, rfc5424)
    if m := _UPTIME_RE.match(text, pos):
        stamp.uptime_s = float(m["up"])
        pos = m.end()
    elif m := _DELTA_RE.match(text, pos):
        stamp.delta_s = float(m["delta"])
        pos = m.end()
    stamp.message = text[pos:]
    return stamp


def _xid_fields(rest: str) -> tuple[int | None, str | None, str]:
    """``pid=…, name=…, message`` -> (pid, process, message); each part optional.

    A field cut short by journal truncation (``name=pt_main_th>``) is dropped rather than
    reported half-read; the message keeps whatever survived.
    """
    m = _FIELDS_RE.match(rest)
    if m is None:
        if rest.startswith("pid="):  # cut inside the pid itself
            return None, None, ""
        return None, None, rest
    pid_text, name, message = m["pid"], m["name"], m["msg"]
    pid = int(pid_text) if pid_text.isdigit() else None
    if message is None and name not in (None, "<unknown>") and name.endswith(_CUT_MARKS):
        name = None
    process = None if name in (None, "<unknown>") else name
    return pid, process, message or ""


@record
class _Cper:
    """A hardware error record being read: its ``{N}`` counter, its lines so far, and the
    header's stamp (the record's time)."""

    seq: str
    lines: list[str]
    texts: list[str]
    stamp: _Stamp
    previous_boot: bool = False


@record
class _Fallen:
    """The head record of the three-record 'fallen off the bus' message, awaiting its tail."""

    bdf: str
    lines: list[str]
    texts: list[str]
    stamp: _Stamp
    left: int = _FALLEN_SPAN - 1


def _bert_starts(pending: _Cper | None, text: str) -> bool:
    """Whether a line of the BERT block starts a record: the corrected note, or a
    severity line that does not follow that note in the record being read."""
    text = text.strip()
    if text.startswith(_BERT_CORRECTED):
        return True
    return text.startswith(_BERT_SEVERITY) and not (
        pending is not None and pending.texts == [_BERT_CORRECTED])


# Every pattern above needs one of these byte strings, so a line holding none of them cannot
# match anything and is skipped before any regex runs: most of a real log is such lines.
# The "fallen off the bus" records all carry "NVRM"; the mce, lockup, NMI, reset, power,
# temperature, mlx5 and AER patterns each need the literal listed for them. Adding a
# pattern means adding its literal here (tests/unit/test_kernel_log.py holds every known
# line to the same events with and without this filter).
_NEEDLES: tuple[str, ...] = (
    "NVRM", "SXid", "mce: ", "Machine check", "INFO: task", "soft lockup", "LOCKUP", "NMI",
    "GPU reset executed", "Power fault", "insufficient power", "High Temperature",
    "High temperature", "mlx5", "AER: ", "PCIe Bus Error", "[Hardware Error]", "BERT: ",
)
_BYTE_NEEDLES = tuple(n.encode() for n in _NEEDLES)
# What every Xid line holds and no other event's line does (the skip when Xids are full).
_XID_NEEDLE = b"NVRM: Xid ("
# The most events of one kind a windowed read keeps (the newest): a log whose every line is
# an Xid the window cannot date (uptime-only lines, no boot time) stays bounded too.
MAX_EVENTS = 4096


def worth_parsing(line: str) -> bool:
    """Whether ``line`` holds a literal some pattern needs (the prefilter, for text)."""
    return any(needle in line for needle in _NEEDLES)


class _Parser:
    """State across lines: the pending multi-record Xid 79, and what is kept.

    ``cutoff`` (epoch seconds) drops events whose line carries an older wall time, and
    then at most ``MAX_EVENTS`` of each kind are kept, so memory follows the look-back
    window, not the log's length; None keeps every matching line (``snapshot
    --kernel-log``, docs/design.md §8). Dropped lines are counted in ``KernelLog.dropped``.
    """

    def __init__(self, boot_time: float | None, now: float, log: KernelLog,
                 cutoff: float | None = None) -> None:
        self.boot_time, self.now, self.log, self.cutoff = boot_time, now, log, cutoff
        self.fallen: _Fallen | None = None
        self.cper: _Cper | None = None
        self.bert = False  # inside the firmware's block of the previous boot's records
        self._last_index = -2
        # Set while newer blocks already hold the ``MAX_EVENTS`` newest Xids of the window:
        # an older Xid line would be dropped anyway, so it is counted without being parsed.
        self.xids_full = False
        # Places a line that prints no wall time from the lines before it (file reads).
        self.clock: _BlockClock | None = None

    def restart(self, log: KernelLog, clock: _BlockClock) -> None:
        """Collect the next block's events into ``log``: blocks are read newest first,
        so nothing pending carries over from the block before."""
        self.log, self.clock, self.fallen, self._last_index = log, clock, None, -2
        self.cper, self.bert = None, False

    def feed(self, line: str, index: int | None = None, offset: int = 0) -> None:
        """One line that passed the prefilter; ``index`` is its line number in the source,
        so lines skipped in between still break a pending multi-record message, and
        ``offset`` where it starts in the block the clock reads."""
        raw = line.rstrip("\r\n")
        if index is None:
            index = self._last_index + 1
        elif index != self._last_index + 1:
            self.fallen = None
        self._last_index = index
        stamp = _strip_prefix(raw, self.boot_time, self.now)
        if self.clock is not None:
            self.clock.place(offset, stamp)
        if self._continue_fallen(raw, stamp):
            return
        if self._bert_line(raw, stamp):
            return
        if "[Hardware Error]" in raw and (m := _CPER_RE.search(stamp.message)):
            self._cper_line(raw, stamp, m)
            return
        # The driver patterns are distinctive enough to search the whole line, so a prefix
        # this module does not know cannot hide an Xid.
        if "NVRM:" in raw:
            self._nvrm(raw, stamp)
        elif "SXid" in raw:
            self._sxid(raw, stamp)
        else:
            self._event(raw, stamp)

    def skip(self, index: int) -> None:
        """A line left unparsed (an Xid beyond those kept): counted as dropped, and it
        breaks a pending multi-record message as any other line would."""
        self._last_index, self.fallen = index, None
        self.log.dropped += 1

    def continue_fallen(self, line: str) -> bool:
        """Offer a line of the newer block to a three-record Xid 79 this block ended on;
        True when it took it. Never parses the line otherwise: the newer block, read
        first, has counted whatever it holds."""
        raw = line.rstrip("\r\n")
        return self._continue_fallen(raw, _strip_prefix(raw, self.boot_time, self.now))

    def continue_cper(self, line: str) -> bool | None:
        """Offer a line of the newer block to the hardware error record this block ended
        on: True when it took it, False when the line ends the record, None when the line
        is not the record's (another driver's line printed between two of its lines)."""
        pending = self.cper
        if pending is None:
            return False
        raw = line.rstrip("\r\n")
        if "[Hardware Error]" not in raw:
            return None
        message = _strip_prefix(raw, self.boot_time, self.now).message
        if pending.previous_boot:
            b = _BERT_RE.match(message)
            if b is None or _bert_starts(pending, b["text"]):
                return False
            self._cper_append(pending, raw, b["text"])
            return True
        m = _CPER_RE.search(message)
        if m is None:
            return None
        if m["seq"] != pending.seq or m["text"].startswith(_CPER_HEAD):
            return False
        self._cper_append(pending, raw, m["text"])
        return True

    def end_cper(self) -> None:
        """The record being read is complete: keep it as one ``cper`` event."""
        pending, self.cper = self.cper, None
        # A previous boot's record is printed once, early in this boot: the look-back
        # window, which follows this boot's lines, does not drop it (host.cper bounds it).
        if pending is not None and (pending.previous_boot or self._kept(pending.stamp)):
            self.log.events.append(KernelEvent(
                kind="cper", message="\n".join(pending.texts), raw="\n".join(pending.lines),
                time=pending.stamp.time, uptime_s=pending.stamp.uptime_s,
                previous_boot=pending.previous_boot))

    def trim(self) -> None:
        """Keep the newest ``MAX_EVENTS`` of each kind when reading with a window."""
        if self.cutoff is None:
            return
        for events in (self.log.xids, self.log.sxids, self.log.events):
            excess = len(events) - MAX_EVENTS
            if excess > 0:
                del events[:excess]
                self.log.dropped += excess

    def _kept(self, stamp: _Stamp) -> bool:
        if self.cutoff is not None and stamp.time is not None and stamp.time < self.cutoff:
            self.log.dropped += 1
            return False
        return True

    def _continue_fallen(self, raw: str, stamp: _Stamp) -> bool:
        """Collect the records after a 'The NVIDIA GPU <bdf>' head; True when consumed."""
        pending = self.fallen
        if pending is None:
            return False
        if ("NVRM:" not in stamp.message or "Xid" in stamp.message
                or _FALLEN_HEAD_RE.search(stamp.message)):
            self.fallen = None
            return False
        pending.lines.append(raw)
        pending.texts.append(_NVRM_PREFIX_RE.sub("", stamp.message, count=1))
        if _FALLEN_TAIL in stamp.message:
            self.fallen = None
            self._add_xid(79, pending.bdf, None, None, " ".join(pending.texts),
                          "\n".join(pending.lines), pending.stamp)
        else:
            pending.left -= 1
            if pending.left == 0:
                self.fallen = None
        return True

    def _cper_line(self, raw: str, stamp: _Stamp, m: re.Match[str]) -> None:
        """A line of a hardware error record: a header starts one (ending the one before),
        a line with the pending record's counter joins it, and one whose record's header
        was not read (cut off by the window or the ring) is no event."""
        seq, text = m["seq"], m["text"]
        if text.startswith(_CPER_HEAD):
            self.end_cper()
            self.cper = _Cper(seq, [raw], [text.strip()], stamp)
        elif self.cper is not None and self.cper.seq == seq:
            self._cper_append(self.cper, raw, text)
        else:
            self.end_cper()

    def _bert_line(self, raw: str, stamp: _Stamp) -> bool:
        """A line of the firmware's block of the previous boot's records (or its head);
        True when taken. Any other line ends the block, and the record it was reading."""
        message = stamp.message
        if message.startswith(_BERT_HEAD):
            self.end_cper()
            self.bert = True
            return True
        if not self.bert:
            return False
        m = _BERT_RE.match(message)
        if m is None:
            self.bert = False
            self.end_cper()
            return False
        text, pending = m["text"], self.cper
        if pending is not None and pending.previous_boot and not _bert_starts(pending, text):
            self._cper_append(pending, raw, text)
        elif _bert_starts(None, text):
            self.end_cper()
            self.cper = _Cper("", [raw], [text.strip()], stamp, previous_boot=True)
        return True

    @staticmethod
    def _cper_append(pending: _Cper, raw: str, text: str) -> None:
        if len(pending.lines) < CPER_MAX_LINES:
            pending.lines.append(raw)
            pending.texts.append(text.strip())

    def _nvrm(self, raw: str, stamp: _Stamp) -> None:
        if m := _XID_RE.search(raw):
            pid, process, message = _xid_fields(m["rest"] or "")
            gi = int(m["gi"]) if m["gi"] is not None else None
            self._add_xid(int(m["xid"]), m["bdf"] or "", pid, process, message, raw, stamp, gi)
        elif m := _FALLEN_ONE_RE.search(raw):
            self._add_xid(79, m["bdf"], None, None, m["msg"], raw, stamp)
        elif m := _FALLEN_HEAD_RE.search(raw):
            text = _NVRM_PREFIX_RE.sub("", raw[m.start():], count=1)
            if _FALLEN_TAIL in raw:  # a journal entry holding all three records
                self._add_xid(79, m["bdf"], None, None, text, raw, stamp)
            else:
                self.fallen = _Fallen(m["bdf"], [raw], [text], stamp)
        else:
            self._event(raw, stamp)

    def _add_xid(self, xid: int, bdf: str, pid: int | None, process: str | None,
                 message: str, raw: str, stamp: _Stamp, gpu_instance: int | None = None,
                 ) -> None:
        if self._kept(stamp):
            self.log.xids.append(XidEvent(
                xid=xid, pci_bdf=normalize_bdf(bdf) or bdf, pid=pid, process=process,
                message=message, raw=raw, gpu_instance=gpu_instance, time=stamp.time,
                uptime_s=stamp.uptime_s))

    def _sxid(self, raw: str, stamp: _Stamp) -> None:
        m = _SXID_RE.search(raw)
        if m is None:
            self._event(raw, stamp)
        elif self._kept(stamp):
            self.log.sxids.append(SxidEvent(
                sxid=int(m["sxid"]), pci_bdf=normalize_bdf(m["bdf"]) or m["bdf"],
                message=m["msg"] or "", raw=raw, time=stamp.time, uptime_s=stamp.uptime_s,
                switch_device=m["dev"]))

    def _event(self, raw: str, stamp: _Stamp) -> None:
        msg = stamp.message
        for kind, pattern in _EVENT_PATTERNS:
            m = pattern.search(msg)
            if m is None:
                continue
            if not self._kept(stamp):
                return
            groups = m.groupdict()
            device: str | None
            if groups.get("src"):
                device = normalize_bdf(groups["src"]) or groups["src"]
            elif groups.get("uuid"):
                device = groups["uuid"]
            elif d := _DEVICE_RE.search(msg):
                device = normalize_bdf(d["bdf"]) or d["bdf"]
            else:
                device = None
            self.log.events.append(KernelEvent(
                kind=kind, message=msg, raw=raw, device=device, time=stamp.time,
                uptime_s=stamp.uptime_s))
            return


# --- reading a source in blocks --------------------------------------------------------

# Read this much at a time: the needles are searched in a whole block at C speed, and only
# the lines that hold one are cut out, decoded and parsed. A block is parsed whole, so one
# much longer than the look-back window (a 10,000-line log is ~2 MB) parses lines the
# window drops: at 64 KiB (~350 lines) the newest-first read stops close to the window's
# start, and the per-block cost stays small beside the lines' (bench/kernel_log_parse.py).
_BLOCK_BYTES = 1 << 16
# A "line" longer than this without a newline (a binary file) is taken as it stands.
_MAX_LINE_BYTES = 4 << 20


def _blocks(handle: BinaryIO) -> Iterator[bytes]:
    """The source as blocks of whole lines (the last may lack its newline)."""
    tail = b""
    while chunk := handle.read(_BLOCK_BYTES):
        block = tail + chunk
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            if len(block) < _MAX_LINE_BYTES:
                tail = block
                continue
            cut = len(block)
        tail = block[cut:]
        yield block[:cut]
    if tail:
        yield tail


def _candidates(block: bytes) -> list[int]:
    """Start offsets, in order, of the block's lines that hold a needle."""
    starts: set[int] = set()
    for needle in _BYTE_NEEDLES:
        pos = block.find(needle)
        while pos != -1:
            starts.add(block.rfind(b"\n", 0, pos) + 1)
            end = block.find(b"\n", pos)
            if end == -1:
                break
            pos = block.find(needle, end)
    return sorted(starts)


def _feed_block(parser: _Parser, block: bytes, first_index: int, *,
                kmsg: bool = False) -> int:
    """Parse the candidate lines of one block whose first line is number ``first_index``;
    the number of lines it held. In a file of kmsg records (``kmsg``) the " KEY=value"
    dictionary lines under a record are neither lines nor parsed."""
    lead = 1 if kmsg and block.startswith(b" ") else 0
    newlines = dictionary = previous = 0
    for start in _candidates(block):
        newlines += block.count(b"\n", previous, start)
        if kmsg:  # a "\n " pair starts a dictionary line; the one at `previous` included
            dictionary += block.count(b"\n ", max(previous - 1, 0), start)
        previous = start
        if kmsg and block.startswith(b" ", start):
            continue
        end = block.find(b"\n", start)
        end = end if end != -1 else len(block)
        index = first_index + newlines - (dictionary + lead if start else 0)
        if parser.xids_full and block.find(_XID_NEEDLE, start, end) != -1:
            parser.skip(index)
            continue
        parser.feed(block[start:end].decode("utf-8", errors="replace"), index, start)
    lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
    if kmsg:
        lines -= block.count(b"\n ") + lead
    return lines


# --- placing lines in time -------------------------------------------------------------


class _BlockClock:
    """Times the lines of one block that print no wall time from the nearest earlier line
    that does: a ``dmesg -H`` delta is added to it, an uptime is placed from the boot time
    a line printing both gave. Lines are scanned only back to the last line placed, so a
    block costs one pass however many of its lines need placing, and none when every
    candidate prints its own time."""

    def __init__(self, block: bytes, now: float) -> None:
        self.block, self.now = block, now
        self.scanned = 0  # lines starting before this offset are accounted for
        self.time: float | None = None  # the running clock at ``scanned``
        self.boot: float | None = None  # wall time of uptime 0, from a line printing both
        self.boot_uptime = 0.0  # the uptime that line printed (an earlier one: a reboot)

    def place(self, offset: int, stamp: _Stamp) -> None:
        """Give ``stamp`` (the line at ``offset``) a time when the lines before place it."""
        if stamp.time is None:
            base, deltas = self._walk_back(offset)
            stamp.time = self._placed(base, deltas + (stamp.delta_s or 0.0), stamp.uptime_s)
        self._note(stamp)
        self.scanned = offset + 1

    def at_end(self) -> None:
        """Bring the clock to the block's last line (the time the next block starts from)."""
        size = len(self.block)
        base, deltas = self._walk_back(size + (0 if self.block.endswith(b"\n") else 1))
        if base is not None:
            self.time = base + deltas
        self.scanned = len(self.block)

    def first_time(self) -> float | None:
        """The wall time of the block's oldest line that prints one: how far back it reaches."""
        pos = 0
        while pos < len(self.block):
            end = self.block.find(b"\n", pos)
            end = len(self.block) if end == -1 else end
            stamp = self._stamp(pos, end)
            if stamp.time is not None:
                return stamp.time
            pos = end + 1
        return None

    def last_uptime(self) -> float | None:
        """The uptime the block's newest line that prints one printed."""
        end = len(self.block) - (1 if self.block.endswith(b"\n") else 0)
        while end >= 0:
            start = self.block.rfind(b"\n", 0, end) + 1
            stamp = self._stamp(start, end)
            if stamp.uptime_s is not None:
                return stamp.uptime_s
            end = start - 1
        return None

    def resolve(self, uptime: float | None) -> float | None:
        """The time, as of this block's end, of a later line read before any placed one."""
        return self._placed(self.time, 0.0, uptime)

    def _placed(self, base: float | None, deltas: float, uptime: float | None) -> float | None:
        if uptime is not None and self.boot is not None and uptime >= self.boot_uptime:
            return self.boot + uptime
        return None if base is None else base + deltas

    def _note(self, stamp: _Stamp) -> None:
        if stamp.time is None:
            return
        self.time = stamp.time
        if stamp.uptime_s is not None:
            self.boot, self.boot_uptime = stamp.time - stamp.uptime_s, stamp.uptime_s

    def _walk_back(self, offset: int) -> tuple[float | None, float]:
        """The nearest earlier wall time (or the clock at ``scanned``) and the deltas the
        lines from it up to ``offset`` add."""
        deltas, end = 0.0, offset - 1
        while end >= 0:
            start = self.block.rfind(b"\n", 0, end) + 1
            if start < self.scanned:
                break
            stamp = self._stamp(start, end)
            if stamp.time is not None:
                self._note(stamp)
                return stamp.time, deltas
            deltas += stamp.delta_s or 0.0
            end = start - 1
        return self.time, deltas

    def _stamp(self, start: int, end: int) -> _Stamp:
        line = self.block[start:end].decode("utf-8", errors="replace")
        return _strip_prefix(line, None, self.now)


def _blocks_backward(handle: BinaryIO, size: int) -> Iterator[bytes]:
    """The file as blocks of whole lines, the newest block first (lines in order within
    a block): a windowed read reaches the window first however long the log is."""
    pos, head = size, b""
    while pos > 0:
        start = max(0, pos - _BLOCK_BYTES)
        handle.seek(start)
        block = handle.read(pos - start) + head
        pos, head = start, b""
        if pos > 0:
            cut = block.find(b"\n") + 1
            if cut == 0 and len(block) < _MAX_LINE_BYTES:
                head = block
                continue
            head, block = block[:cut], block[cut:]
        if block:
            yield block
    if head:
        yield head


_Event = XidEvent | SxidEvent | KernelEvent
_KINDS = ("xids", "sxids", "events")
_E = TypeVar("_E", XidEvent, SxidEvent, KernelEvent)


@record
class _Backward:
    """What a newest-first read has gathered: each block's events (newest block first),
    the events not yet placed in time, and how far back it reached."""

    parts: list[KernelLog] = field(default_factory=list)
    pending: list[_Event] = field(default_factory=list)
    oldest: float | None = None  # the oldest wall time read
    last_uptime: float | None = None  # the file's newest uptime stamp
    stopped: str | None = None
    # Per kind, the events the parts hold that were placed inside the window as they were
    # read (those placed later are not counted: an older block is then parsed, not lost).
    held: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_KINDS, 0))


def _events(log: KernelLog) -> Iterator[_Event]:
    yield from log.xids
    yield from log.sxids
    yield from log.events


def _read_backward(handle: BinaryIO, size: int, parser: _Parser,
                   deadline: float | None) -> _Backward:
    """Parse the file newest block first until a block starts before the window (or the
    deadline passes), placing every event in time from the lines before it."""
    done, log = _Backward(), parser.log
    newer_head: list[bytes] = []
    newer_block = b""
    for block in _blocks_backward(handle, size):
        if deadline is not None and done.parts and time.monotonic() > deadline:
            done.stopped = _cut_reason(log.lines_read, done.oldest)
            break
        part, clock = KernelLog(source=log.source), _BlockClock(block, parser.now)
        parser.restart(part, clock)
        parser.xids_full = done.held["xids"] >= MAX_EVENTS
        lines = _feed_block(parser, block, 0)
        log.lines_read += lines
        _finish_fallen(parser, newer_head)
        _finish_cper(parser, newer_block)
        newer_head = block.split(b"\n", _FALLEN_SPAN - 1)[:_FALLEN_SPAN - 1]
        newer_block = block
        if not done.parts:
            done.last_uptime = clock.last_uptime()
        clock.at_end()
        _place_pending(done.pending, clock)
        done.pending = [e for e in (*done.pending, *_events(part)) if e.time is None]
        _drop_beyond_kept(done.held, part, parser.cutoff)
        done.parts.append(part)
        first = clock.first_time()
        if first is not None:
            done.oldest = first if done.oldest is None else min(done.oldest, first)
            if parser.cutoff is not None and first < parser.cutoff:
                break  # every older line is before the window
    parser.log = log
    return done


def _drop_beyond_kept(held: dict[str, int], part: KernelLog, cutoff: float | None) -> None:
    """Drop an older block's events of a kind the newer blocks already hold ``MAX_EVENTS``
    of inside the window (only the newest are kept in the end, so memory stays bounded by
    what is kept, not by how many the window holds: a log of nothing but Xids), then count
    what this block adds to ``held``."""
    if cutoff is None:
        return
    for kind in _KINDS:
        events = getattr(part, kind)
        if held[kind] >= MAX_EVENTS:
            part.dropped += len(events)
            setattr(part, kind, [])
        else:
            held[kind] += sum(1 for e in events if e.time is not None and e.time >= cutoff)


def _finish_fallen(parser: _Parser, newer_head: list[bytes]) -> None:
    """Complete a three-record Xid 79 whose head ends this block with the first lines of
    the newer block, read before it (alone, those lines are no event)."""
    parser.clock = None  # the record takes its head's time
    for line in newer_head:
        if parser.fallen is None or not parser.continue_fallen(
                line.decode("utf-8", errors="replace")):
            return


def _finish_cper(parser: _Parser, newer_block: bytes) -> None:
    """Complete a hardware error record whose lines run on into the newer block, read
    before it (there, lines whose header it did not hold were no event), and keep it."""
    if parser.cper is not None:
        start = 0
        for _ in range(CPER_MAX_LINES):
            if start >= len(newer_block):
                break
            end = newer_block.find(b"\n", start)
            end = len(newer_block) if end == -1 else end
            line = newer_block[start:end].decode("utf-8", errors="replace")
            if parser.continue_cper(line) is False:
                break
            start = end + 1
    parser.end_cper()


def _place_pending(pending: list[_Event], clock: _BlockClock) -> None:
    """Time the newer block's leading events from the end of the block just read."""
    for event in pending:
        event.time = clock.resolve(event.uptime_s)


def _cut_reason(lines: int, oldest: float | None) -> str:
    reached = "no line it read printed a time" if oldest is None else (
        "back to " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(oldest)))
    return (f"stopped at the source deadline after {lines:,} lines read newest first, "
            f"{reached}: older lines were not read")


def _as_of_mtime(uptime: float | None, last: float | None, mtime: float) -> float:
    """An event's time in a log that prints no wall time, taking the file's newest line as
    written at its modification time: as far before it as their uptimes are apart. An
    uptime past the newest line's is from an earlier boot: placed before this boot began.
    Without uptimes there is nothing to go on but the modification time."""
    if uptime is None or last is None:
        return mtime
    if uptime > last:
        return mtime - last - 1.0
    return mtime - (last - uptime)


def _finish(done: _Backward, parser: _Parser, mtime: float) -> None:
    """Give the events still unplaced a time, apply the window and keep the newest
    ``MAX_EVENTS`` of each kind, in file order."""
    log = parser.log
    approximate = [e for e in done.pending if e.time is None]
    if approximate and done.oldest is None:
        for event in approximate:
            event.time = _as_of_mtime(event.uptime_s, done.last_uptime, mtime)
        log.unknown["time"] = (
            "no line prints a time this parser can place: judged as of the file's "
            "modification time " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
            + ", so the times are approximate")
    else:
        for event in approximate:  # before the first line that prints a time
            event.time = done.oldest
    cutoff = parser.cutoff
    for part in reversed(done.parts):
        log.dropped += part.dropped
        log.xids += _in_window(part.xids, cutoff)
        log.sxids += _in_window(part.sxids, cutoff)
        log.events += _in_window(part.events, cutoff)
        log.dropped += len(part.xids) + len(part.sxids) + len(part.events)
    log.dropped -= len(log.xids) + len(log.sxids) + len(log.events)
    parser.trim()


def _in_window(events: list[_E], cutoff: float | None) -> list[_E]:
    """The events a later block placed inside the window (those placed at once were
    filtered as they were read)."""
    if cutoff is None:
        return events
    return [e for e in events if e.time is None or e.time >= cutoff]


def _parse_stream(handle: BinaryIO, parser: _Parser, deadline: float | None, *,
                  kmsg: bool = False) -> str | None:
    """Feed ``handle`` to ``parser`` block by block; why it stopped early, or None."""
    for block in _blocks(handle):
        parser.log.lines_read += _feed_block(parser, block, parser.log.lines_read, kmsg=kmsg)
        parser.trim()
        if deadline is not None and time.monotonic() > deadline:
            return (f"stopped at the source deadline after {parser.log.lines_read:,} lines: "
                    "the rest was not read")
    return None


# --- public API ------------------------------------------------------------------------


def parse_lines(lines: Iterable[str], *, boot_time: float | None = None,
                now: float | None = None, source: str = "lines") -> KernelLog:
    """Parse kernel-log lines in any of the common wrappers into one ``KernelLog``.

    One event per matching line, in input order, never de-duplicated. ``boot_time``
    (epoch seconds) turns a kmsg record's microseconds into wall time; ``now`` supplies
    the year syslog omits (default: the current time).
    """
    log = KernelLog(source=source, boot_time=boot_time)
    parser = _Parser(boot_time, time.time() if now is None else now, log)
    for index, line in enumerate(lines):
        log.lines_read += 1
        if worth_parsing(line):
            parser.feed(line, index)
    parser.end_cper()
    return log


def _cutoff(now: float, lookback_s: float | None) -> float | None:
    return None if lookback_s is None else now - lookback_s


def read_file(path: str | os.PathLike[str], *, now: float | None = None,
              lookback_s: float | None = None, deadline: float | None = None) -> KernelLog:
    """Parse a saved kernel log (``--kernel-log FILE``); never raises for a bad file, only
    ReadFailed when the process is out of descriptors or memory (no read could succeed).

    Without ``lookback_s`` every matching line is an event (what ``snapshot --kernel-log``
    prints, docs/design.md §8); with it, events dated before the window are counted in
    ``dropped`` instead of kept (what ``run``, the agent and the prolog judge). Reading
    stops at ``deadline`` (monotonic), saying so under ``unknown["file"]``.
    """
    now = time.time() if now is None else now
    source = f"file:{path}"
    log = KernelLog(source=source)
    parser = _Parser(None, now, log, _cutoff(now, lookback_s))
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            done = _read_backward(handle, info.st_size, parser, deadline)
    except OSError as exc:
        raise_if_exhausted(exc, path)
        log.unknown["file"] = _reason(exc)
        return log
    _finish(done, parser, info.st_mtime)
    if done.stopped is not None:
        log.unknown["file"] = done.stopped
    return log


def _reason(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{name}: {exc.strerror or exc}"


def _boot_time(root: Path) -> tuple[float | None, str | None]:
    """``btime`` from ``<root>/proc/stat``: the epoch second the machine booted."""
    try:
        with open_regular(root / "proc" / "stat") as handle:
            text = handle.read().decode("ascii", errors="replace")
    except OSError as exc:
        return None, _reason(exc)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "btime" and parts[1].isascii() and parts[1].isdigit():
            return float(parts[1]), None
    return None, "no btime line in proc/stat"


# A kmsg record is at most ~8 KiB (PRINTK_MESSAGE_MAX plus the dictionary); a read with
# a smaller buffer fails with EINVAL, so give room.
_KMSG_READ_SIZE = 16384
# The largest ring buffer the kernel builds by default is 32 MiB (CONFIG_LOG_BUF_SHIFT=25).
# A device that never runs dry (a tree whose dev/kmsg is /dev/zero) would otherwise fill
# memory for as long as the process lives, long after the source's deadline.
_KMSG_MAX_BYTES = 64 << 20


def _read_kmsg_device(fd: int, parser: _Parser, deadline: float | None) -> str | None:
    """Feed a kmsg character device to ``parser`` record by record, never blocking; why
    it stopped early, or None once the ring is drained."""
    total = reads = 0
    while True:
        reads += 1
        if reads % 1024 == 0:
            parser.trim()
            if deadline is not None and time.monotonic() > deadline:
                return "stopped at the source deadline: the rest of the ring was not read"
        try:
            chunk = os.read(fd, _KMSG_READ_SIZE)
        except BlockingIOError:  # EAGAIN: no more records
            return None
        except BrokenPipeError:  # EPIPE: the ring overwrote the next record; go on
            continue
        except OSError as exc:
            return f"read stopped: {_reason(exc)}"
        if not chunk:
            return None
        total += len(chunk)
        if total > _KMSG_MAX_BYTES:
            return f"read stopped after {_KMSG_MAX_BYTES >> 20} MiB: not a ring buffer"
        # One read() returns one record: header line plus " KEY=value" lines.
        record = chunk.split(b"\n", 1)[0]
        if not (record[:1].isdigit() and b";" in record):  # not a "PRIO,SEQ,USEC,..;" record
            continue
        parser.log.lines_read += 1
        if any(needle in record for needle in _BYTE_NEEDLES):
            parser.feed(record.decode("utf-8", errors="replace"), parser.log.lines_read - 1)


# Refused by a cgroup device policy (EPERM) or by the node's mode and dmesg_restrict
# (EACCES, kernel.dmesg_restrict=1 without CAP_SYSLOG: Documentation/admin-guide/sysctl/
# kernel.rst): the agent's unit grants both (systemd/clusterdiag-agent.service).
_DENIED = (errno.EPERM, errno.EACCES)
_KMSG_DENIED = (" opening /dev/kmsg: under clusterdiag-agent.service it needs "
                "DeviceAllow=/dev/kmsg r and CAP_SYSLOG")


def read_kmsg(root: Path, lookback_s: float, *, now: float | None = None,
              deadline: float | None = None) -> KernelLog:
    """Read the live kernel ring buffer (``<root>/dev/kmsg``), keeping events from the
    last ``lookback_s`` seconds.

    Opening ``/dev/kmsg`` starts at the oldest record still in the ring, which is what a
    one-shot run needs (no follow mode here; the daemon's listener is separate). A
    character device is read record by record without ever blocking; a regular file of
    records (captured trees, tests) in blocks, like ``read_file``. Without a boot time the
    records cannot be placed in wall time, so none is filtered out and the reason is
    recorded under ``unknown["boot_time"]``.
    """
    now = time.time() if now is None else now
    boot_time, boot_problem = _boot_time(root)
    log = KernelLog(source="kmsg", boot_time=boot_time)
    parser = _Parser(boot_time, now, log, _cutoff(now, lookback_s))
    try:
        fd = os.open(root / "dev" / "kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise_if_exhausted(exc, root / "dev" / "kmsg")
        log.unknown["kmsg"] = _reason(exc) + (_KMSG_DENIED if exc.errno in _DENIED else "")
        return log
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            with os.fdopen(os.dup(fd), "rb") as handle:
                stopped = _parse_stream(handle, parser, deadline, kmsg=True)
        else:
            stopped = _read_kmsg_device(fd, parser, deadline)
    except OSError as exc:
        stopped = _reason(exc)
    finally:
        os.close(fd)
    parser.end_cper()
    parser.trim()
    if boot_problem is not None:
        log.unknown["boot_time"] = boot_problem
    if stopped is not None:
        log.unknown["kmsg"] = stopped
    return log


__all__ = ["parse_lines", "read_file", "read_kmsg"]
