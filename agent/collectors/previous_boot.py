"""The previous boot's hardware error records, read once when the agent starts.

A fatal APEI/CPER record usually ends the boot it is logged in (ghes.c __ghes_panic), so
the live kernel log (``/dev/kmsg``) of the boot after it holds nothing of it. journald
keeps a boot's kernel messages across the reboot only where its storage is persistent:
with ``Storage=auto``, the default, "data will be stored persistently if the
/var/log/journal directory exists", else only under /run/log/journal, which a reboot
loses (journald.conf(5), Storage=). Where it does, the agent asks

    journalctl -k -b -1 -o short-iso-precise --no-pager -n 100000

journalctl(1): ``-k``/``--dmesg`` shows only kernel messages, ``-b -1`` the boot before
the current one, ``-n`` the most recent lines only (the end of a boot a fatal error ended
is what matters, and it bounds what is printed), ``--no-pager`` never waits on a pager.
``short-iso-precise`` prints each line as ``2026-04-22T21:25:20.466440+0000 host kernel:
text`` (systemd src/shared/logs-show.c output_timestamp_realtime(): strftime
"%Y-%m-%dT%H:%M:%S" plus ".%06u" and "%z"; output_short() adds hostname and
identifier), a prefix kernel_log's ISO pattern and kernel tag already read. Where the
agent reads a tree other than ``/`` (``--root``), ``-D ROOT/var/log/journal`` makes
journalctl read that tree's journal, not this machine's.

What journalctl says when there is nothing to read is a note, never a finding: with no
previous boot in the journal it exits 1 with "Data from the specified boot (-1) is not
available: No such boot ID in journal" (systemd 252, Debian 12, run on an empty journal
directory); with only a volatile journal it exits 0 saying "Specifying boot ID or boot
offset has no effect, no persistent journal was found." (journalctl.c). Its output is
hostile input: cut at ``MAX_BYTES`` (the newest kept), parsed by the same bounded parser
as the live log, and only fatal and recoverable records are kept, at most
``MAX_PREVIOUS_BOOT_RECORDS``. ``run`` and the Slurm programs never ask: one start of
journalctl over a long boot's journal costs seconds.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from ..model.kernel import MAX_PREVIOUS_BOOT_RECORDS, BootRecord, PreviousBoot
from ..read.sources import CommandRunner
from .kernel_log import parse_lines

JOURNAL_DIR = "var/log/journal"
MAX_LINES = 100_000
# journalctl prints at most MAX_LINES lines; a kernel record is at most 1 KiB of text
# (PRINTKRB_RECORD_MAX, kernel/printk/printk.c), so this is far above an honest answer.
MAX_BYTES = 32 << 20
TIMEOUT_S = 10.0
# A kernel line's text is at most 1 KiB; a longer one is cut, not kept whole.
_LINE_CHARS = 4096
_STDERR_CHARS = 200
# cper.c cper_estatus_print(): "event severity: %s" from severity_strs; corrected and
# informational records do not outlive their boot's rate.
_KEPT_RE = re.compile(r"^event severity: (?:fatal|recoverable)$", re.M)


def argv_for(root: Path) -> list[str]:
    argv = ["journalctl", "-k", "-b", "-1", "-o", "short-iso-precise", "--no-pager",
            "-n", str(MAX_LINES)]
    if root != Path("/"):
        argv += ["-D", str(root / JOURNAL_DIR)]
    return argv


def record_id(time: float | None, message: str) -> str:
    """The same record read again (the agent restarted within the boot) gets the same
    id, so a record the operator cleared stays cleared."""
    return f"cper-{int(time or 0)}-{zlib.crc32(message.encode()):08x}"


def _said(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:_STDERR_CHARS] if lines else ""


def read(runner: CommandRunner, root: Path, now: float,
         timeout_s: float = TIMEOUT_S) -> PreviousBoot:
    """The previous boot's fatal and recoverable hardware error records, or why none
    could be read; never raises for what journalctl answers."""
    if not (root / JOURNAL_DIR).is_dir():
        return PreviousBoot(f"not read: no persistent journal (/{JOURNAL_DIR} absent, so "
                            "journald keeps no earlier boot: journald.conf(5) Storage=)")
    result = runner(argv_for(root), timeout_s)
    if result.returncode is None:
        return PreviousBoot(f"not read: {(result.error or 'journalctl failed')[:_STDERR_CHARS]}")
    if result.returncode != 0:
        said = _said(result.stderr) or _said(result.stdout)
        return PreviousBoot(f"not read: journalctl exit {result.returncode}"
                            + (f": {said}" if said else ""))
    out, cut = result.stdout, len(result.stdout) > MAX_BYTES
    if cut:
        out = out[-MAX_BYTES:].split("\n", 1)[-1]
    lines = [line[:_LINE_CHARS] for line in out.splitlines()]
    if not lines and (said := _said(result.stderr)):
        return PreviousBoot(f"not read: {said}")
    log = parse_lines(lines, now=now, source="journal:previous_boot")
    # A BERT block in that boot reported the boot before it: not this record's boot.
    kept = [e for e in log.events if e.kind == "cper" and not e.previous_boot
            and _KEPT_RE.search(e.message)]
    records = [BootRecord(record_id(e.time, e.message), e)
               for e in kept[-MAX_PREVIOUS_BOOT_RECORDS:]]
    return PreviousBoot(f"journalctl -k -b -1: {log.lines_read:,} lines, {len(kept)} fatal "
                        "or recoverable hardware error records"
                        + (f" (output cut to its last {MAX_BYTES:,} bytes)" if cut else ""),
                        records)


__all__ = ["JOURNAL_DIR", "MAX_BYTES", "MAX_LINES", "argv_for", "read", "record_id"]
