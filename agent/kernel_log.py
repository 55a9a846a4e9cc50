"""Read the kernel log and pick out the lines the checks judge: Xids, SXids and a few others.

The same Xid line reaches us in many wrappers: a bare ``/dev/kmsg`` record, ``dmesg`` with
``[uptime]``, ``dmesg -T`` (ctime), ``dmesg --time-format iso`` (optionally with
``--decode``'s ``kern  :warn  :``), syslog and ``journalctl`` (``Mon DD hh:mm:ss host
kernel:``, the month in whatever locale the box runs). Instead of one regex per wrapper,
each line is split into (timestamp prefix, kernel message) and the message is matched by
driver-specific patterns. The formats and their sources are in hardware.md §5.1; the real
lines the tests hold us to are under ``shared/data/real/xid``.

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
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .model.kernel import KernelEvent, KernelLog, SxidEvent, XidEvent
from .sysfs import open_regular

# domain:bus:device, domain 4 hex digits on x86 and up to 8 elsewhere (hardware.md §5.1).
_BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_BDF_FN = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

# --- prefixes --------------------------------------------------------------------------
# /dev/kmsg: "PRIO,SEQ,USEC_SINCE_BOOT,FLAGS[,...];MESSAGE" (Documentation/ABI/testing/dev-kmsg).
_KMSG_RE = re.compile(r"\d+,\d+,(?P<usec>\d+),[^;]*;")
# `dmesg -r` keeps the console priority: "<4>[  12.345678] ...".
_PRIO_RE = re.compile(r"<\d+>")
# `dmesg --decode`: "kern  :warn  : ".
_DECODE_RE = re.compile(r"[a-z]+ *:[a-z]+ *: ")
# `dmesg --time-format iso` (comma fraction), journalctl -o short-iso(-precise), RFC 3339 syslog.
_ISO_RE = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T ](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d\d:?\d\d)?\s+"
)
# `dmesg -T`: "[Sun Feb 23 16:24:18 2025] ".
_CTIME_RE = re.compile(
    r"\[[A-Z][a-z]{2} (?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) "
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) (?P<y>\d{4})\]\s*"
)
# syslog / journalctl short: "Apr  6 15:47:19 host kernel: " -- any locale's month ("kwi").
# The kernel tag is tried first so "Apr  6 15:47:19 kernel: NVRM: ..." (no host) keeps its
# "NVRM:"; other tags (a logger-written line) need the host.
_SYSLOG_RE = re.compile(
    r"(?P<mon>[^\W\d_]{3,5}\.?) +(?P<d>\d{1,2}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?:\.\d+)? +(?:(?:\S+ )?kernel: |\S+ [^\s:\[]+(?:\[\d+\])?: )"
)
# After an ISO stamp only a kernel tag is stripped, so "watchdog: BUG: ..." stays whole.
_KERNEL_TAG_RE = re.compile(r"(?:\S+ )?kernel: ")
_UPTIME_RE = re.compile(r"\[\s*(?P<up>\d+\.\d+)\]\s*")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

# --- NVIDIA ----------------------------------------------------------------------------
# hardware.md §5.1's parser, with the bdf allowed a function and the MIG instance kept;
# a code cut off by truncation ("79>") has no comma after it and is not trusted.
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bdf>" + _BDF + r")(?: GPU-I:(?P<gi>\d+))?[^)]*\): "
    r"(?P<xid>\d+)(?:, ?(?P<rest>.*))?$"
)
_FIELDS_RE = re.compile(
    r"pid=(?P<pid>'<unknown>'|<unknown>|\d+)"
    r"(?:, name=(?P<name><unknown>|[^,]*))?"
    r"(?:, (?P<msg>.*))?$"
)
# Xid 79 printed without an Xid token (gpud PR #1209; NVSentinel issue #155): one line,
# or three records "The NVIDIA GPU <bdf>" / "(PCI ID: ...) installed in this system has" /
# "fallen off the bus and is not responding to commands."
_FALLEN_ONE_RE = re.compile(
    r"NVRM: GPU (?P<bdf>" + _BDF + r"): (?P<msg>GPU has fallen off the bus.*)")
_FALLEN_HEAD_RE = re.compile(r"NVRM: The NVIDIA GPU (?P<bdf>" + _BDF + r")")
_FALLEN_TAIL = "fallen off the bus"
_FALLEN_SPAN = 3  # records the three-record form may take, counted from its head
_NVRM_PREFIX_RE = re.compile(r"NVRM: ?")
_SXID_RE = re.compile(
    r"(?P<dev>nvidia-nvswitch\d+): SXid \((?:PCI:)?(?P<bdf>" + _BDF + r")\): "
    r"(?P<sxid>\d+)(?:, ?(?P<msg>.*))?$"
)
# journalctl/less cut a long line and mark it; the cut field cannot be trusted.
_CUT_MARKS = (">", "\u2026")

# --- other kernel events ---------------------------------------------------------------
# (kind, pattern). First match wins, so the specific mlx5 lines precede mlx5_health.
_EVENT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # arch/x86/kernel/cpu/mce: "mce: [Hardware Error]: Machine check events logged".
    ("mce", re.compile(r"\bmce: (?:\[Hardware Error\]|Uncorrected hardware memory error)"
                       r"|Machine check events logged")),
    # kernel/hung_task.c: "INFO: task %s:%d blocked for more than %ld seconds."
    ("hung_task", re.compile(r"INFO: task .+:\d+ blocked for more than \d+ seconds")),
    # kernel/watchdog.c: "watchdog: BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]"
    ("soft_lockup", re.compile(r"BUG: soft lockup - CPU#\d+ stuck for")),
    # kernel/watchdog(_perf).c: "Watchdog detected hard LOCKUP on cpu %d"; panic variant.
    ("hard_lockup", re.compile(r"Watchdog detected hard LOCKUP on cpu \d+"
                               r"|Kernel panic - not syncing: Hard LOCKUP")),
    # arch/x86/kernel/nmi.c: unknown_nmi_error, pci_serr_error, io_check_error.
    ("nmi", re.compile(r"Uhhuh\. NMI received for unknown reason"
                       r"|NMI: (?:PCI system error \(SERR\)|IOCK error)")),
    # The NVIDIA driver does not log a GPU reset as such. What shows one happened: the
    # kernel module being loaded again ("NVRM: loading NVIDIA UNIX ... Kernel Module") and
    # NVSentinel's reset acknowledgement ("GPU reset executed: GPU-<uuid>", written with
    # logger by its reset script). "NVRM: GPU at PCI:...: GPU-<uuid>" is NOT one: the
    # driver prints it as the header of a GPU's first Xid report (raw_logs/
    # gpud_dmesg-with-xid-119.log; NVSentinel uses it only to map bus id -> UUID).
    ("gpu_reset", re.compile(r"NVRM: loading NVIDIA UNIX .*Kernel Module"
                             r"|GPU reset executed: (?P<uuid>GPU-[0-9a-fA-F-]+)")),
    # drivers/pci/hotplug/pciehp: "Slot(%s): Power fault"; mlx5 events.c mlx5_pcie_event.
    ("pcie_slot_power", re.compile(r"Slot\([^)]*\): Power fault"
                                   r"|Detected insufficient power on the PCIe slot")),
    # mlx5 events.c: port_module "Port module event[error]: module %u, %s, %s" with error
    # "High Temperature"; temp_warn "High temperature on sensors with bit set %llx %llx".
    ("module_temperature", re.compile(r"Port module event.*High Temperature"
                                      r"|High temperature on sensors")),
    # mlx5 health.c / cmd.c: lost heartbeat, fatal sensors, syndromes, recovery, cmd leak.
    ("mlx5_health", re.compile(
        r"mlx5.*(?:health compromised|Fatal error \d+ detected|synd 0x[0-9a-fA-F]+:"
        r"|unrecoverable hardware error|health recovery|handling bad device"
        r"|Driver is in error state|Will cause a leak of a command resource)")),
    # drivers/pci/pcie/aer.c: "AER: [Multiple ]<severity> error received: <bdf>" and, since
    # 6.x, "AER: Correctable error message received from <bdf>".
    ("aer", re.compile(
        r"AER: (?:Multiple )?(?:Corrected|Correctable|Uncorrected \((?:Non-)?Fatal\)) "
        r"error (?:message )?received(?: from)?:? ?(?P<src>" + _BDF_FN + r")?")),
)
_DEVICE_RE = re.compile(r"(?<![0-9a-fA-F:])(?P<bdf>" + _BDF_FN + r")")


def normalize_bdf(text: str) -> str:
    """``0000:9B:00`` / ``00000000:9b:00.0`` -> ``0000:9b:00.0``: the form NVML, sysfs and
    the log all reduce to, so events join with devices whatever the printer's width."""
    head, _, function = text.partition(".")
    domain, bus, device = head.split(":")
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function or 0)}"


# --- one line --------------------------------------------------------------------------


@dataclass
class _Stamp:
    """Where a line's kernel message starts, and the times its prefix carried."""

    message: str
    time: float | None = None
    uptime_s: float | None = None


def _wall_time(year: int, month: int, day: int, clock: tuple[int, int, int],
               frac: str | None = None, tz: str | None = None) -> float | None:
    """Epoch seconds of a printed wall time; local time when no zone is printed (what
    ``dmesg -T`` and syslog print). None for an impossible date rather than an error."""
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
        return stamp.timestamp()
    except (ValueError, OverflowError):
        return None


def _syslog_time(mon: str, day: int, clock: tuple[int, int, int], now: float) -> float | None:
    """Syslog omits the year: take ``now``'s, or the one before when that would put the
    line more than a day in the future (a December line read in January)."""
    month = _MONTHS.get(mon)
    if month is None:  # a localised month name ("kwi"): the line still counts, untimed
        return None
    year = time.localtime(now).tm_year
    stamp = _wall_time(year, month, day, clock)
    if stamp is not None and stamp > now + 86400:
        stamp = _wall_time(year - 1, month, day, clock)
    return stamp


def _clock(match: re.Match[str]) -> tuple[int, int, int]:
    return int(match["h"]), int(match["mi"]), int(match["s"])


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
    if m := _PRIO_RE.match(text):
        pos = m.end()
    if m := _DECODE_RE.match(text, pos):
        pos = m.end()
    if m := _ISO_RE.match(text, pos):
        stamp.time = _wall_time(int(m["y"]), int(m["mo"]), int(m["d"]), _clock(m),
                                m["frac"], m["tz"])
        pos = m.end()
        if k := _KERNEL_TAG_RE.match(text, pos):
            pos = k.end()
    elif m := _CTIME_RE.match(text, pos):
        month = _MONTHS.get(m["mon"])
        if month is not None:
            stamp.time = _wall_time(int(m["y"]), month, int(m["d"]), _clock(m))
        pos = m.end()
    elif m := _SYSLOG_RE.match(text, pos):
        stamp.time = _syslog_time(m["mon"], int(m["d"]), _clock(m), now)
        pos = m.end()
    elif k := _KERNEL_TAG_RE.match(text, pos):
        pos = k.end()
    if m := _UPTIME_RE.match(text, pos):
        stamp.uptime_s = float(m["up"])
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


@dataclass
class _Fallen:
    """The head record of the three-record 'fallen off the bus' message, awaiting its tail."""

    bdf: str
    lines: list[str]
    texts: list[str]
    stamp: _Stamp
    left: int = _FALLEN_SPAN - 1


@dataclass
class _Parser:
    """State across lines: only the pending multi-record Xid 79."""

    boot_time: float | None
    now: float
    log: KernelLog
    fallen: _Fallen | None = None

    def feed(self, line: str) -> None:
        raw = line.rstrip("\r\n")
        self.log.lines_read += 1
        stamp = _strip_prefix(raw, self.boot_time, self.now)
        if self._continue_fallen(raw, stamp):
            return
        # The driver patterns are distinctive enough to search the whole line, so a prefix
        # this module does not know cannot hide an Xid.
        if "NVRM:" in raw:
            self._nvrm(raw, stamp)
        elif "SXid" in raw:
            self._sxid(raw, stamp)
        else:
            self._event(raw, stamp)

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

    def _nvrm(self, raw: str, stamp: _Stamp) -> None:
        if m := _XID_RE.search(raw):
            pid, process, message = _xid_fields(m["rest"] or "")
            gi = int(m["gi"]) if m["gi"] is not None else None
            self._add_xid(int(m["xid"]), m["bdf"], pid, process, message, raw, stamp, gi)
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
        self.log.xids.append(XidEvent(
            xid=xid, pci_bdf=normalize_bdf(bdf), pid=pid, process=process, message=message,
            raw=raw, gpu_instance=gpu_instance, time=stamp.time, uptime_s=stamp.uptime_s))

    def _sxid(self, raw: str, stamp: _Stamp) -> None:
        m = _SXID_RE.search(raw)
        if m is None:
            self._event(raw, stamp)
            return
        self.log.sxids.append(SxidEvent(
            sxid=int(m["sxid"]), pci_bdf=normalize_bdf(m["bdf"]), message=m["msg"] or "",
            raw=raw, time=stamp.time, uptime_s=stamp.uptime_s, switch_device=m["dev"]))

    def _event(self, raw: str, stamp: _Stamp) -> None:
        msg = stamp.message
        for kind, pattern in _EVENT_PATTERNS:
            m = pattern.search(msg)
            if m is None:
                continue
            groups = m.groupdict()
            device: str | None
            if groups.get("src"):
                device = normalize_bdf(groups["src"])
            elif groups.get("uuid"):
                device = groups["uuid"]
            elif d := _DEVICE_RE.search(msg):
                device = normalize_bdf(d["bdf"])
            else:
                device = None
            self.log.events.append(KernelEvent(
                kind=kind, message=msg, raw=raw, device=device, time=stamp.time,
                uptime_s=stamp.uptime_s))
            return


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
    for line in lines:
        parser.feed(line)
    return log


def _decoded(data: Iterable[bytes]) -> Iterator[str]:
    """Bytes as read -> text; a log holds whatever the kernel and drivers wrote, so bytes
    that are not UTF-8 become U+FFFD instead of failing the whole read."""
    for chunk in data:
        yield chunk.decode("utf-8", errors="replace")


def read_file(path: str | os.PathLike[str], *, now: float | None = None) -> KernelLog:
    """Parse a saved kernel log (``--kernel-log FILE``); never raises for a bad file."""
    source = f"file:{path}"
    try:
        with open(path, "rb") as handle:
            return parse_lines(_decoded(handle), now=now, source=source)
    except OSError as exc:
        log = KernelLog(source=source)
        log.unknown["file"] = _reason(exc)
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


def _kmsg_records(path: Path) -> tuple[list[str], str | None]:
    """All records of ``path``: a character device read record by record without ever
    blocking, or a regular file of records (captured trees, tests) read whole."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    records: list[str] = []
    total = 0
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            with os.fdopen(os.dup(fd), "rb") as handle:
                return [line.decode("utf-8", errors="replace") for line in handle], None
        while True:
            try:
                chunk = os.read(fd, _KMSG_READ_SIZE)
            except BlockingIOError:  # EAGAIN: no more records
                return records, None
            except BrokenPipeError:  # EPIPE: the ring overwrote the next record; go on
                continue
            except OSError as exc:
                return records, f"read stopped: {_reason(exc)}"
            if not chunk:
                return records, None
            total += len(chunk)
            if total > _KMSG_MAX_BYTES:
                return records, f"read stopped after {_KMSG_MAX_BYTES >> 20} MiB: not a ring buffer"
            # One read() returns one record: header line plus " KEY=value" lines.
            records.append(chunk.decode("utf-8", errors="replace").split("\n", 1)[0])
    finally:
        os.close(fd)


def read_kmsg(root: Path, lookback_s: float, *, now: float | None = None) -> KernelLog:
    """Read the live kernel ring buffer (``<root>/dev/kmsg``), keeping records from the
    last ``lookback_s`` seconds.

    Opening ``/dev/kmsg`` starts at the oldest record still in the ring, which is what a
    one-shot run needs (no follow mode here; the daemon's listener is separate). Without a
    boot time the records cannot be placed in wall time, so none is filtered out and the
    reason is recorded under ``unknown["boot_time"]``.
    """
    now = time.time() if now is None else now
    boot_time, boot_problem = _boot_time(root)
    try:
        records, read_problem = _kmsg_records(root / "dev" / "kmsg")
    except OSError as exc:
        log = KernelLog(source="kmsg", boot_time=boot_time)
        log.unknown["kmsg"] = _reason(exc)
        return log
    cutoff = now - lookback_s
    kept = []
    seen = 0
    for record in records:
        head = _KMSG_RE.match(record)
        if head is None:  # a " KEY=value" dictionary line of a captured file
            continue
        seen += 1
        if boot_time is None or boot_time + int(head["usec"]) / 1e6 >= cutoff:
            kept.append(record)
    log = parse_lines(kept, boot_time=boot_time, now=now, source="kmsg")
    log.lines_read = seen
    if boot_problem is not None:
        log.unknown["boot_time"] = boot_problem
    if read_problem is not None:
        log.unknown["kmsg"] = read_problem
    return log


__all__ = ["normalize_bdf", "parse_lines", "read_file", "read_kmsg"]
