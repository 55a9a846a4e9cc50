"""The kernel-log reader against real Xid/SXid lines and the wrappers they arrive in.

Three kinds of input, kept apart on purpose:
- ``tests/fixtures/real/xid``: the hand-checked corpus (kmsg.txt vs expected.tsv), real
  lines under Apache-2.0 (see its PROVENANCE.md).
- ``tests/fixtures/kernel_log``: Apache-2.0 lines copied verbatim (see PROVENANCE.md).
- lines marked CONSTRUCTED below: a copied message put in another wrapper, or a line
  written from the kernel's/driver's format string where no licensed real line exists.
"""

from __future__ import annotations

import csv
import errno
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from clusterdiag.agent.collectors.kernel_log import parse_lines, read_file, read_kmsg
from clusterdiag.agent.model.kernel import KernelLog, XidEvent
from clusterdiag.agent.model.pci import normalize_bdf
from clusterdiag.agent.model.serde import from_jsonable, to_jsonable

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log"
# The hand-checked real corpus (tests/fixtures/real/xid/PROVENANCE.md).
REAL_XID = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "xid"

# A fixed "now" (2025-06-15T12:00Z) so the year syslog omits is deterministic.
NOW = 1_750_000_000.0

# Copied from fixtures/gpud_dmesg-with-xid-119.log line 3 (message part, no prefix).
MSG_119 = (
    "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of "
    "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
)
TEXT_119 = MSG_119.split("nvidia-smi, ", 1)[1]


def _local(year: int, month: int, day: int, hour: int, minute: int, second: int) -> float:
    return time.mktime((year, month, day, hour, minute, second, 0, 0, -1))


def _utc(year: int, month: int, day: int, hour: int, minute: int, second: int,
         microsecond: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, microsecond,
                    tzinfo=timezone.utc).timestamp()


def _fixture(name: str) -> KernelLog:
    return read_file(FIXTURES / name, now=NOW)


def _read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def _nullable(text: str) -> str | None:
    return None if text in ("", "<unknown>") else text


# --- the real corpus -------------------------------------------------------------------


def test_every_real_xid_line_parses_as_hand_checked() -> None:
    lines = (REAL_XID / "kmsg.txt").read_text(encoding="utf-8").splitlines()
    rows = _read_tsv(REAL_XID / "expected.tsv")
    assert len(lines) == len(rows) > 0
    mismatches = []
    for line, row in zip(lines, rows, strict=True):
        log = parse_lines([line], now=NOW)
        assert (len(log.xids), log.sxids, log.events) == (1, [], []), line
        event = log.xids[0]
        pid = _nullable(row["pid"])
        got = (event.pci_bdf, event.xid, event.pid, event.process, event.message)
        want = (row["pci_bdf"], int(row["xid"]), None if pid is None else int(pid),
                _nullable(row["process_name"]), row["message"])
        if got != want:
            mismatches.append((row["line"], got, want))
        assert event.raw == line
    assert mismatches == []


def test_real_xid_file_keeps_order_and_every_duplicate() -> None:
    rows = _read_tsv(REAL_XID / "expected.tsv")
    log = read_file(REAL_XID / "kmsg.txt", now=NOW)
    assert log.source == f"file:{REAL_XID / 'kmsg.txt'}"
    assert [(e.xid, e.pci_bdf) for e in log.xids] == [
        (int(r["xid"]), r["pci_bdf"]) for r in rows]
    # The Xid 13 burst on 38:00 is 16 lines; none may be merged away.
    assert sum(1 for e in log.xids if e.xid == 13) == 16


def test_every_real_sxid_line_parses_as_hand_checked() -> None:
    lines = (REAL_XID / "sxid_kmsg.txt").read_text(encoding="utf-8").splitlines()
    rows = _read_tsv(REAL_XID / "sxid_expected.tsv")
    assert len(lines) == len(rows) > 0
    for line, row in zip(lines, rows, strict=True):
        log = parse_lines([line], now=NOW)
        assert (log.xids, len(log.sxids), log.events) == ([], 1, []), line
        event = log.sxids[0]
        assert (event.switch_device, event.pci_bdf, event.sxid, event.message) == (
            row["switch_device"], row["pci_bdf"], int(row["sxid"]), row["message"])
        assert event.uptime_s is not None
        assert event.time is None


@pytest.mark.parametrize(("name", "xids"), [
    ("gpud_dmesg-with-xid-119.log", 5),
    ("gpud_dmesg.0.log", 11),
    ("gpud_memory_dmesg.decode.iso.log", 17),
])
def test_real_raw_logs_find_each_xid_line_and_nothing_else(name: str, xids: int) -> None:
    path = FIXTURES / name  # gpud's whole test logs (fixtures/kernel_log/PROVENANCE.md)
    text = path.read_text(encoding="utf-8")
    log = read_file(path, now=NOW)
    assert log.unknown == {}
    assert log.lines_read == len(text.splitlines())
    assert len(log.xids) == xids == text.count("NVRM: Xid")
    # Stack traces, peermem and OOM lines, and the "NVRM: GPU at PCI:" Xid header are
    # context, not events.
    assert (log.sxids, log.events) == ([], [])
    assert all(e.time is not None for e in log.xids)


# --- timestamp wrappers ----------------------------------------------------------------


def test_dmesg_ctime_prefix_is_local_wall_time() -> None:
    log = _fixture("gpud_dmesg-with-xid-119.log")
    first = log.xids[0]
    assert (first.xid, first.pci_bdf, first.pid, first.process) == (
        119, "0000:9b:00.0", 2024380, "nvidia-smi")
    assert first.message == TEXT_119
    assert first.time == _local(2025, 2, 23, 16, 24, 18)
    assert first.uptime_s is None
    assert [e.process for e in log.xids] == [
        "nvidia-smi", "nvidia-smi", "nvidia-smi", "cache_mgr_main", "gpud"]


def test_dmesg_iso_prefix_keeps_microseconds_and_unknown_pid() -> None:
    log = _fixture("gpud_dmesg.0.log")
    first, fourth = log.xids[0], log.xids[3]
    assert (first.xid, first.pid, first.process) == (48, None, None)
    assert first.time == pytest.approx(_utc(2024, 11, 15, 12, 2, 3, microsecond=470068))
    assert (fourth.xid, fourth.pid, fourth.process, fourth.message) == (
        94, 1248209, "python3.10", "Ch 00000008")


def test_dmesg_decode_iso_prefix() -> None:
    log = _fixture("gpud_memory_dmesg.decode.iso.log")
    assert [e.xid for e in log.xids] == [13] * 16 + [43]
    times = [e.time for e in log.xids if e.time is not None]
    assert len(times) == len(log.xids)
    assert times == sorted(times)
    assert times[0] == pytest.approx(_utc(2025, 1, 21, 4, 41, 44, microsecond=283302))
    last = log.xids[-1]
    assert (last.pid, last.process, last.message) == (2924364, "pt_main_thread", "Ch 00000008")
    assert log.events == []  # oom-kill lines are not among the kinds


def test_uptime_and_bare_gb200_lines_with_other_pci_domains() -> None:
    log = _fixture("gpud_gb200_kmsg.txt")
    assert len(log.xids) == 23
    assert {e.pci_bdf.split(":")[0] for e in log.xids} == {"0008", "0009", "0018", "0019"}
    first = log.xids[0]
    assert (first.xid, first.pci_bdf, first.uptime_s) == (149, "0009:01:00.0", 171167.620236)
    # No line prints a wall time: judged as of the file's modification time, and said so.
    assert first.time is not None
    assert "approximate" in log.unknown["time"]
    # The driver's alignment spaces inside the NVLink5 payload are kept.
    assert first.message.startswith("NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6")
    ray = [e for e in log.xids if e.process == "ray::WorkerDict"]
    assert [(e.xid, e.pid) for e in ray] == [(145, 876767), (145, 876766)]
    assert all(e.uptime_s is None for e in log.xids[9:])


# CONSTRUCTED: MSG_119 inside the other wrappers a node produces.
@pytest.mark.parametrize(("line", "boot_time", "wall", "uptime"), [
    (MSG_119, None, None, None),
    ("[6781741.548779] " + MSG_119, None, None, 6781741.548779),
    ("<4>[  123.456789] " + MSG_119, None, None, 123.456789),
    ("kern  :warn  : [  123.456789] " + MSG_119, None, None, 123.456789),
    ("4,1234,5678901234,-;" + MSG_119, None, None, 5678.901234),
    ("4,1234,5678901234,-;" + MSG_119, 1.7e9, 1.7e9 + 5678.901234, 5678.901234),
    ("4,1234,5678901234,-,caller=T42;" + MSG_119, 1.7e9, 1.7e9 + 5678.901234, 5678.901234),
    ("Feb 23 16:24:18 gpu-node-07 kernel: [6781741.548779] " + MSG_119, None,
     _local(2025, 2, 23, 16, 24, 18), 6781741.548779),
    ("Feb  3 16:24:18 gpu-node-07 kernel: " + MSG_119, None, _local(2025, 2, 3, 16, 24, 18),
     None),
    ("Feb 23 16:24:18.123456 gpu-node-07 kernel: " + MSG_119, None,
     _local(2025, 2, 23, 16, 24, 18), None),
    ("kwi 23 16:24:18 gpu-node-07 kernel: " + MSG_119, None, None, None),
    ("Feb 23 16:24:18 kernel: " + MSG_119, None, _local(2025, 2, 23, 16, 24, 18), None),
    ("2025-02-23T16:24:18+0000 gpu-node-07 kernel: " + MSG_119, None,
     _utc(2025, 2, 23, 16, 24, 18), None),
    ("2025-02-23T16:24:18.250000+01:00 gpu-node-07 kernel: [  12.5] " + MSG_119, None,
     _utc(2025, 2, 23, 15, 24, 18) + 0.25, 12.5),
    # syslog RFC 3164 with its priority, as a forwarder writes it.
    ("<4>Feb 23 16:24:18 gpu-node-07 kernel: " + MSG_119, None,
     _local(2025, 2, 23, 16, 24, 18), None),
    # syslog RFC 5424: version, host, app, procid, msgid, no structured data.
    ("<4>1 2025-02-23T16:24:18.466440Z gpu-node-07 kernel - - - " + MSG_119, None,
     _utc(2025, 2, 23, 16, 24, 18, 466440), None),
    ('<4>1 2025-02-23T16:24:18Z gpu-node-07 kernel - - [meta sequenceId="1"] ' + MSG_119,
     None, _utc(2025, 2, 23, 16, 24, 18), None),
    # Talos (`talosctl dmesg`), nanosecond UTC stamp.
    ("172.20.0.5: kern: err: [2025-02-23T16:24:18.466440686Z]: " + MSG_119, None,
     _utc(2025, 2, 23, 16, 24, 18, 466440), None),
    # node-problem-detector's pod log (klog), and a container runtime's log file of it.
    ("I0223 16:24:18.466440       1 log_monitor.go:160] " + MSG_119, None,
     _local(2025, 2, 23, 16, 24, 18), None),
    ("2025-02-23T16:24:18.466440686Z stdout F " + MSG_119, None,
     _utc(2025, 2, 23, 16, 24, 18, 466440), None),
    # `dmesg -d` (uptime and delta) and `dmesg -T -d`.
    ("[  123.456789 <    0.000844>] " + MSG_119, None, None, 123.456789),
    ("[Sun Feb 23 16:24:18 2025 <    0.000844>] " + MSG_119, None,
     _local(2025, 2, 23, 16, 24, 18), None),
    # `dmesg -H`: the minute's first line.
    ("[Feb23 16:24] " + MSG_119, None, _local(2025, 2, 23, 16, 24, 0), None),
])
def test_prefix_forms(line: str, boot_time: float | None, wall: float | None,
                      uptime: float | None) -> None:
    log = parse_lines([line], boot_time=boot_time, now=NOW)
    assert len(log.xids) == 1, line
    event = log.xids[0]
    assert (event.xid, event.pci_bdf, event.pid, event.process, event.message) == (
        119, "0000:9b:00.0", 2024380, "nvidia-smi", TEXT_119)
    assert event.raw == line
    assert event.time == (pytest.approx(wall) if wall is not None else None)
    assert event.uptime_s == (pytest.approx(uptime) if uptime is not None else None)


def test_syslog_date_from_last_year_when_read_in_january() -> None:
    now = _local(2025, 1, 1, 0, 10, 0)
    log = parse_lines(["Dec 31 23:59:59 gpu-node-07 kernel: " + MSG_119], now=now)
    assert log.xids[0].time == _local(2024, 12, 31, 23, 59, 59)


# --- Xid field forms -------------------------------------------------------------------


def test_name_with_colon_and_brackets_and_another_domain() -> None:
    line = (FIXTURES / "kernel_events.txt").read_text(encoding="utf-8").splitlines()[10]
    (event,) = parse_lines([line], now=NOW).xids
    assert (event.xid, event.pci_bdf, event.pid, event.process) == (
        119, "0002:00:00.0", 1582259, "nvc:[driver]")
    assert event.uptime_s == 16450076.435595


@pytest.mark.parametrize(("line", "pid", "process", "message"), [
    # CONSTRUCTED from gpud_dmesg.0.log line 14 without "name=": the pid-only form.
    ("NVRM: Xid (PCI:0000:19:00): 94, pid=1248209, Ch 00000008", 1248209, None, "Ch 00000008"),
    # CONSTRUCTED: the old format without "PCI:" and without pid/name.
    ("NVRM: Xid (0000:19:00): 94, Ch 00000008", None, None, "Ch 00000008"),
    # pid='<unknown>' with name=<unknown> (gpud_sxid_readme.txt line 1, prefix dropped).
    ("NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     None, None, "GPU has fallen off the bus."),
])
def test_pid_and_name_field_forms(line: str, pid: int | None, process: str | None,
                                  message: str) -> None:
    (event,) = parse_lines([line], now=NOW).xids
    assert (event.pid, event.process, event.message) == (pid, process, message)


def test_mig_gpu_instance() -> None:
    # CONSTRUCTED: a copied Xid 94 line with the GPU instance MIG lines carry.
    mig = "NVRM: Xid (PCI:0000:19:00 GPU-I:3): 94, pid=1248209, name=python3.10, Ch 00000008"
    plain = mig.replace(" GPU-I:3", "")
    with_gi, without = parse_lines([mig, plain], now=NOW).xids
    assert (with_gi.xid, with_gi.pci_bdf, with_gi.gpu_instance, with_gi.process) == (
        94, "0000:19:00.0", 3, "python3.10")
    assert without.gpu_instance is None


# --- Xid 79 without an Xid token -------------------------------------------------------


def test_fallen_off_the_bus_single_line() -> None:
    # CONSTRUCTED from the driver's format (gpud xid/kmsg.go).
    (event,) = parse_lines(["NVRM: GPU 0000:18:00.0: GPU has fallen off the bus."],
                           now=NOW).xids
    assert (event.xid, event.pci_bdf, event.pid, event.process, event.message) == (
        79, "0000:18:00.0", None, None, "GPU has fallen off the bus.")


def test_fallen_off_the_bus_three_records_make_one_event() -> None:
    log = _fixture("nvsentinel_fallen_off_bus.txt")
    (event,) = log.xids
    assert (event.xid, event.pci_bdf, event.uptime_s) == (79, "0000:b3:00.0", 1843.308145)
    assert "installed in this system has fallen off the bus" in event.message
    assert event.raw.count("\n") == 2
    assert log.lines_read == 3


def test_fallen_off_the_bus_as_kmsg_records() -> None:
    # CONSTRUCTED: the same three records as /dev/kmsg delivers them.
    records = [
        "3,900,1843308145,-;NVRM: The NVIDIA GPU 0000:b3:00.0",
        "3,901,1843308146,-;NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "3,902,1843308147,-;NVRM: fallen off the bus and is not responding to commands.",
    ]
    (event,) = parse_lines(records, boot_time=1.7e9, now=NOW).xids
    assert (event.xid, event.pci_bdf) == (79, "0000:b3:00.0")
    assert event.time == pytest.approx(1.7e9 + 1843.308145)


def test_a_head_without_tail_does_not_swallow_the_next_xid() -> None:
    log = parse_lines(["NVRM: The NVIDIA GPU 0000:b3:00.0", MSG_119], now=NOW)
    assert [e.xid for e in log.xids] == [119]


def test_xid_79_and_its_companion_line_are_two_events() -> None:
    # CONSTRUCTED pair as the driver prints it; merging them is the check's job.
    lines = ["NVRM: Xid (PCI:0000:04:00): 79, GPU has fallen off the bus.",
             "NVRM: GPU 0000:04:00.0: GPU has fallen off the bus."]
    assert [(e.xid, e.pci_bdf) for e in parse_lines(lines, now=NOW).xids] == [
        (79, "0000:04:00.0"), (79, "0000:04:00.0")]


# --- truncated and junk input ----------------------------------------------------------

_CUT_43 = "NVRM: Xid (PCI:0000:38:00): 43, pid=2924364, name=pt_main_thread, Ch 00000008"


@pytest.mark.parametrize(("line", "pid", "process", "message"), [
    # CONSTRUCTED journal cuts of copied lines, marked with ">" or "…".
    (_CUT_43[:-len("read, Ch 00000008")] + ">", 2924364, None, ""),
    (_CUT_43[:-len("read, Ch 00000008")] + "\u2026", 2924364, None, ""),
    (_CUT_43[:-len("364, name=pt_main_thread, Ch 00000008")] + ">", None, None, ""),
    (MSG_119[:-40] + ">", 2024380, "nvidia-smi", TEXT_119[:-40] + ">"),
])
def test_truncated_lines_keep_only_what_survived(line: str, pid: int | None,
                                                 process: str | None, message: str) -> None:
    (event,) = parse_lines(["Apr 02 10:11:12 gpu-node-07 kernel: " + line], now=NOW).xids
    assert event.xid in (43, 119)
    assert (event.pid, event.process, event.message) == (pid, process, message)


def test_a_code_cut_short_is_not_guessed() -> None:
    assert parse_lines(["NVRM: Xid (PCI:0000:38:00): 4>"], now=NOW).xids == []


def test_binary_junk_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_bytes(
        b"\xff\xfe\x00\x01garbage \x80\x81\n"
        + bytes(range(256)) * 3 + b"\n"
        + b"NVRM: Xid (PCI:zz:00:00): 79, pid=1\n"
        + b"Feb 23 16:24:18 gpu-node-07 kernel: " + MSG_119.replace("nvidia-smi", "caf\xe9")
        .encode("latin-1") + b"\n"
        + b"\x00" * 64
    )
    log = read_file(path, now=NOW)
    assert log.unknown == {}
    (event,) = log.xids
    assert (event.xid, event.pid, event.process) == (119, 2024380, "caf\ufffd")
    # Each copy of range(256) holds a 0x0a, so the junk is four lines: eight in all.
    assert log.lines_read == 8


def test_unreadable_file_is_recorded_not_raised(tmp_path: Path) -> None:
    missing = read_file(tmp_path / "nope.log")
    assert (missing.xids, missing.sxids, missing.events) == ([], [], [])
    assert missing.unknown["file"].startswith("ENOENT")
    assert missing.source == f"file:{tmp_path / 'nope.log'}"
    directory = read_file(tmp_path)
    assert directory.unknown["file"].startswith("EISDIR")


# --- NVSwitch and other kernel events --------------------------------------------------


def test_sxid_fixture() -> None:
    log = _fixture("gpud_sxid_readme.txt")
    assert [(e.xid, e.pid) for e in log.xids] == [(79, None)]
    assert [e.switch_device for e in log.sxids] == [
        "nvidia-nvswitch1", "nvidia-nvswitch0", "nvidia-nvswitch2", "nvidia-nvswitch0",
        "nvidia-nvswitch2", "nvidia-nvswitch0", "nvidia-nvswitch2", "nvidia-nvswitch0"]
    assert {e.sxid for e in log.sxids} == {20034}
    assert log.sxids[0].message == "Fatal, Link 48 LTSSM Fault Up"


def test_kernel_event_fixture_kinds_devices_and_times() -> None:
    log = _fixture("kernel_events.txt")
    kinds = [(e.kind, e.device) for e in log.events]
    assert kinds == [
        ("hung_task", None),
        ("hung_task", None),
        ("pcie_slot_power", "0000:5c:00.0"),
        ("module_temperature", None),
        ("mlx5_health", "0000:41:00.0"),
        ("mlx5_health", "0000:41:00.0"),
        ("mlx5_health", "0000:03:00.0"),
        ("module_temperature", "0000:5c:00.0"),
        ("gpu_reset", "GPU-22222222-2222-2222-2222-222222222222"),
    ]  # line 10 (ACCESS_REG failed) is monitoring noise and matches no kind
    assert [e.xid for e in log.xids] == [119]
    first, second = log.events[0], log.events[1]
    assert first.message == "INFO: task containerd-shim:931150 blocked for more than 122 seconds."
    # The first line prints only an uptime and no line before it a time: it takes the
    # oldest time the file prints (the next line's), never "now".
    assert (first.uptime_s, first.time) == (228678.600423, second.time)
    # Oct 16 is after NOW's June date, so syslog's missing year is the previous one.
    assert second.time == _local(2024, 10, 16, 20, 47, 19)
    assert log.events[3].time == _local(2024, 12, 1, 14, 54, 40)


# CONSTRUCTED from the kernel's format strings (file named per line); no Apache/MIT
# licensed real line was at hand for these.
@pytest.mark.parametrize(("line", "kind", "device"), [
    # arch/x86/kernel/cpu/mce/core.c
    ("[  313.747594] mce: [Hardware Error]: Machine check events logged", "mce", None),
    ("mce: [Hardware Error]: CPU 2: Machine Check: 0 Bank 5: bea0000000000108", "mce", None),
    # kernel/watchdog.c, kernel/watchdog_perf.c, arch/x86/kernel/nmi.c
    ("[  95.97] watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [python3:4242]",
     "soft_lockup", None),
    ("[  75.21] NMI watchdog: Watchdog detected hard LOCKUP on cpu 2", "hard_lockup", None),
    ("[ 232.43] Uhhuh. NMI received for unknown reason 3d on CPU 56.", "nmi", None),
    # drivers/pci/pcie/aer.c: the reporting device is the one named after "received"
    ("pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0", "aer", "0000:01:00.0"),
    ("pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:02:00.0", "aer",
     "0000:02:00.0"),
    ("pcieport 0000:00:1c.4: AER: Multiple Uncorrected (Non-Fatal) error received: "
     "0000:07:00.0", "aer", "0000:07:00.0"),
    ("pcieport 0000:00:1c.4: AER: Correctable error message received from 0000:07:00.0", "aer",
     "0000:07:00.0"),
    ("pcieport 0000:00:1c.4: AER: Uncorrected (Fatal) error received: id=00e4", "aer",
     "0000:00:1c.4"),
    # drivers/pci/hotplug/pciehp_hpc.c
    ("pcieport 0000:00:1c.0: pciehp: Slot(1): Power fault", "pcie_slot_power", "0000:00:1c.0"),
    # drivers/net/ethernet/mellanox/mlx5/core/{health,events}.c
    ("mlx5_core 0000:41:00.0: mlx5_health_try_recover:342:(pid 3612): starting health "
     "recovery flow", "mlx5_health", "0000:41:00.0"),
    ("mlx5_core 0000:41:00.0: poll_health:813:(pid 0): Fatal error 1 detected",
     "mlx5_health", "0000:41:00.0"),
    ("mlx5_core 0000:41:00.0: temp_warn:165:(pid 0): High temperature on sensors with bit set "
     "0 1", "module_temperature", "0000:41:00.0"),
    # NVSentinel's reset script: logger -t nvsentinel-gpu-reset "GPU reset executed: ..."
    ("Nov 30 00:23:01 gpu-node-07 nvsentinel-gpu-reset: GPU reset executed: "
     "GPU-22222222-2222-2222-2222-222222222222, success: true", "gpu_reset",
     "GPU-22222222-2222-2222-2222-222222222222"),
    # the NVIDIA kernel module being loaded again
    ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.163.01  Tue Apr  8 12:41:17 UTC 2025",
     "gpu_reset", None),
])
def test_kernel_event_kinds(line: str, kind: str, device: str | None) -> None:
    log = parse_lines([line], now=NOW)
    assert [(e.kind, e.device) for e in log.events] == [(kind, device)]
    assert log.events[0].raw == line


@pytest.mark.parametrize("line", [
    # The Xid report header: printed before a GPU's first Xid, not on a reset.
    "[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: "
    "GPU-509665ad-b600-ac93-3616-d754b23d636d",
    # CONSTRUCTED: a thermal notice from the mce driver, and a cable unplug.
    "mce: CPU12: Core temperature above threshold, cpu clock throttled",
    "mlx5_core 0000:63:00.1: Port module event: module 1, Cable unplugged",
    "some random log message",
    "",
])
def test_lines_that_are_not_events(line: str) -> None:
    log = parse_lines([line], now=NOW)
    assert (log.xids, log.sxids, log.events) == ([], [], [])


def test_aer_message_keeps_the_severity_word() -> None:
    (event,) = parse_lines(
        ["pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0"],
        now=NOW).events
    assert "Uncorrected (Non-Fatal)" in event.message


# --- /dev/kmsg -------------------------------------------------------------------------

BOOT = 1_700_000_000


def _kmsg_root(tmp_path: Path, records: list[str], btime: int | None = BOOT) -> Path:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text("".join(r + "\n" for r in records), encoding="utf-8")
    if btime is not None:
        (tmp_path / "proc").mkdir()
        (tmp_path / "proc" / "stat").write_text(
            f"cpu  1 2 3 4\nintr 0\nbtime {btime}\nprocesses 9\n", encoding="ascii")
    return tmp_path


# CONSTRUCTED kmsg records around copied messages: one old, two recent, one dictionary line.
_RECORDS = [
    "4,10,100000000,-;" + MSG_119,
    "4,11,5000000000,-;" + MSG_119,
    " SUBSYSTEM=pci",
    " DEVICE=+pci:0000:9b:00.0",
    "4,12,5001000000,-;nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 "
    "LTSSM Fault Up",
]


def test_read_kmsg_keeps_only_the_lookback_window(tmp_path: Path) -> None:
    root = _kmsg_root(tmp_path, _RECORDS)
    log = read_kmsg(root, 600.0, now=BOOT + 5100.0)
    assert log.source == "kmsg"
    assert log.boot_time == BOOT
    assert log.lines_read == 3  # records, not dictionary lines
    (xid,) = log.xids
    assert xid.time == pytest.approx(BOOT + 5000.0)
    assert xid.uptime_s == pytest.approx(5000.0)
    assert [s.time for s in log.sxids] == [pytest.approx(BOOT + 5001.0)]
    assert log.unknown == {}
    everything = read_kmsg(root, 1e9, now=BOOT + 5100.0)
    assert len(everything.xids) == 2


def test_read_kmsg_without_btime_keeps_everything_and_says_why(tmp_path: Path) -> None:
    log = read_kmsg(_kmsg_root(tmp_path, _RECORDS, btime=None), 600.0, now=BOOT + 5100.0)
    assert len(log.xids) == 2
    assert all(e.time is None for e in log.xids)
    assert log.unknown["boot_time"].startswith("ENOENT")


def test_read_kmsg_missing_device(tmp_path: Path) -> None:
    log = read_kmsg(tmp_path, 600.0, now=NOW)
    assert (log.xids, log.sxids, log.events) == ([], [], [])
    assert log.unknown["kmsg"].startswith("ENOENT")


def test_read_kmsg_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _kmsg_root(tmp_path, _RECORDS)
    real_open = os.open

    def denied(path: os.PathLike[str] | str, flags: int, *args: int) -> int:
        if str(path).endswith("kmsg"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", denied)
    log = read_kmsg(root, 600.0, now=BOOT + 5100.0)
    assert log.unknown["kmsg"].startswith("EPERM")
    assert log.xids == []


def test_read_kmsg_device_reads_records_skips_epipe_stops_at_eagain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dev").mkdir()
    os.mkfifo(tmp_path / "dev" / "kmsg")  # not a regular file: the record-by-record path
    replies: list[bytes | OSError] = [
        (_RECORDS[0] + "\n SUBSYSTEM=pci\n").encode(),
        BrokenPipeError(errno.EPIPE, "overwritten"),
        (_RECORDS[1] + "\n").encode(),
        BlockingIOError(errno.EAGAIN, "no more"),
        b"never read",
    ]
    real_read = os.read
    fifo = os.stat(tmp_path / "dev" / "kmsg")

    def fake_read(fd: int, size: int) -> bytes:
        if os.fstat(fd).st_ino != fifo.st_ino:
            return real_read(fd, size)
        reply = replies.pop(0)
        if isinstance(reply, OSError):
            raise reply
        return reply

    monkeypatch.setattr(os, "read", fake_read)
    log = read_kmsg(tmp_path, 1e9, now=NOW)
    assert [e.uptime_s for e in log.xids] == [100.0, 5000.0]
    assert replies == [b"never read"]
    assert "kmsg" not in log.unknown


def test_read_kmsg_never_blocks_on_a_quiet_device(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    os.mkfifo(tmp_path / "dev" / "kmsg")  # no writer: a blocking read would hang forever
    started = time.monotonic()
    log = read_kmsg(tmp_path, 600.0, now=NOW)
    assert time.monotonic() - started < 30.0  # a guard: a blocking read never returns
    assert log.xids == []
    assert "kmsg" not in log.unknown


@pytest.mark.skipif(not os.path.exists("/dev/kmsg"), reason="no /dev/kmsg on this machine")
def test_read_kmsg_live_device_returns_promptly() -> None:
    started = time.monotonic()
    log = read_kmsg(Path("/"), 3600.0)
    assert time.monotonic() - started < 30.0  # a guard: a blocking read never returns
    assert log.source == "kmsg"
    assert "kmsg" in log.unknown or log.lines_read > 0


# --- model and helpers -----------------------------------------------------------------


@pytest.mark.parametrize(("text", "bdf"), [
    ("0000:9B:00", "0000:9b:00.0"),
    ("00000000:86:00.0", "0000:86:00.0"),
    ("0008:01:00", "0008:01:00.0"),
    ("10000:01:00.1", "10000:01:00.1"),
])
def test_normalize_bdf(text: str, bdf: str) -> None:
    assert normalize_bdf(text) == bdf


def test_kernel_log_survives_a_json_round_trip() -> None:
    log = _fixture("kernel_events.txt")
    log.xids.append(XidEvent(79, "0000:04:00.0", None, None, "x", "raw", gpu_instance=2))
    log.unknown["kmsg"] = "EPERM: Operation not permitted"
    assert from_jsonable(KernelLog, to_jsonable(log)) == log
