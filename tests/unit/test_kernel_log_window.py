"""A saved kernel log is read newest first, and every line is placed in time.

A windowed read (``run``, the agent, the prolog) must reach the look-back window however
long the log is, say when it stopped short, and never count a line it cannot date as
recent: a months-old Xid behind a prefix the parser did not know used to drain a node.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import kernel_log
from clusterdiag.agent.collectors.kernel_log import read_file

NOW = 1_750_000_000.0  # 2025-06-15T14:13:20Z
# Copied from tests/fixtures/real/xid/kmsg.txt line 1 (message part, no prefix).
XID_79 = ("NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, "
          "GPU has fallen off the bus.")
# Copied from tests/fixtures/kernel_log/gpud_dmesg.0.log (ordinary chatter).
NOISE = "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready"


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(at))


def test_a_long_log_cut_by_the_deadline_still_reads_the_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", 4096)
    path = tmp_path / "kern.log"
    # Three hours of lines two seconds apart, the Xid the newest: the deadline has passed
    # before the read starts, so only the newest block is read.
    old = [f"{_iso(NOW - 10800 + 2 * i)} {NOISE}" for i in range(5000)]
    recent = [f"{_iso(NOW - 60)} {XID_79}"]
    path.write_text("\n".join(old + recent) + "\n")
    log = read_file(path, now=NOW, lookback_s=7200, deadline=time.monotonic() - 1)
    assert [x.xid for x in log.xids] == [79]
    assert log.lines_read < 100
    reason = log.unknown["file"]
    assert reason.startswith("stopped at the source deadline")
    assert "lines read newest first, back to 2025-06-15T" in reason


def test_a_windowed_read_stops_once_lines_are_older_than_the_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", 4096)
    path = tmp_path / "kern.log"
    lines = [f"{_iso(NOW - 86400 + 8 * i)} {NOISE}" for i in range(10000)]
    path.write_text("\n".join(lines) + "\n")
    log = read_file(path, now=NOW, lookback_s=7200)
    assert 0 < log.lines_read < 2000  # two hours of eight-second lines, and a block
    assert log.unknown == {}


def test_a_seven_month_old_talos_xid_is_not_recent(tmp_path: Path) -> None:
    path = tmp_path / "talos.log"
    path.write_text(f"172.20.0.5: kern: err: [2024-11-15T12:02:03.466440686Z]: {XID_79}\n")
    log = read_file(path, now=NOW, lookback_s=7200)
    assert log.xids == []
    assert log.dropped == 1


def test_an_undated_line_takes_the_time_of_the_line_before(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_text(f"{_iso(NOW - 30 * 86400)} {NOISE}\n"
                    f"kwi 23 16:24:18 gpu-node-07 kernel: {XID_79}\n")  # a month unread
    log = read_file(path, now=NOW)
    assert [x.time for x in log.xids] == [NOW - 30 * 86400]
    assert read_file(path, now=NOW, lookback_s=7200).xids == []


def test_an_uptime_line_is_placed_from_the_boot_time_the_log_gives(tmp_path: Path) -> None:
    path = tmp_path / "syslog"
    # The syslog line prints wall time and uptime, so boot = its time - 100 s.
    path.write_text(f"2025-06-15T10:00:00+00:00 gpu-node-07 kernel: [  100.000000] {NOISE}\n"
                    f"[  400.500000] {XID_79}\n")
    (xid,) = read_file(path, now=NOW).xids
    boot = time.mktime((2025, 6, 15, 10, 0, 0, 0, 0, 0)) - time.timezone - 100
    assert xid.time == pytest.approx(boot + 400.5)


def test_dmesg_relative_stamps_accumulate(tmp_path: Path) -> None:
    path = tmp_path / "dmesg-H"
    path.write_text(f"[Jun15 10:00] {NOISE}\n[  +1.500000] {NOISE}\n"
                    f"[  +2.250000] {XID_79}\n")
    (xid,) = read_file(path, now=NOW).xids
    start = time.mktime((2025, 6, 15, 10, 0, 0, 0, 0, -1))
    assert xid.time == pytest.approx(start + 3.75)


def test_a_log_with_no_placeable_line_is_judged_as_of_its_mtime(tmp_path: Path) -> None:
    path = tmp_path / "dmesg"
    path.write_text(f"[  100.000000] {XID_79}\n[  160.000000] {XID_79}\n")
    mtime = NOW - 10 * 86400
    os.utime(path, (mtime, mtime))
    log = read_file(path, now=NOW, lookback_s=7200)
    assert log.xids == []  # ten days old: outside the window
    assert log.dropped == 2
    everything = read_file(path, now=NOW)
    assert [x.time for x in everything.xids] == [mtime - 60, mtime]
    assert "approximate" in everything.unknown["time"]


@pytest.mark.parametrize("tail", [
    # a head the next line breaks: that next line is an event of its own, counted once
    [XID_79],
    # the three records of one fall off the bus: one Xid 79
    ["NVRM: (PCI ID: 10de:2330) installed in this system has",
     "NVRM: fallen off the bus and is not responding to commands."],
])
def test_a_record_split_between_blocks_is_counted_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: list[str]) -> None:
    """Block sizes from two lines up (a real block, 1 MiB, holds thousands), so that each
    line in turn starts a block: the newer block's first lines complete a three-record
    head the older block ends on, and are never parsed a second time as lines of their
    own."""
    lines = [f"{_iso(NOW - 90 + i)} {text}" for i, text in enumerate(
        [NOISE, NOISE, "NVRM: The NVIDIA GPU 0000:91:00.0", *tail, NOISE])]
    path = tmp_path / "kern.log"
    path.write_text("\n".join(lines) + "\n")
    for size in range(200, len(path.read_bytes()) + 1, 7):
        monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", size)
        log = read_file(path, now=NOW, lookback_s=7200)
        assert [x.xid for x in log.xids] == [79], (size, log.xids)


def test_a_log_with_no_wall_time_is_placed_from_its_newest_line(tmp_path: Path) -> None:
    """The newest line, not the newest event, was written at the file's modification time:
    an Xid 23 days of uptime before the last line is 23 days old. An Xid whose uptime is
    past the last line's is from an earlier boot: placed no later than this boot began."""
    path = tmp_path / "dmesg"
    path.write_text(f"[  100.000000] {XID_79}\n[2000000.000000] {NOISE}\n")
    mtime = NOW - 60
    os.utime(path, (mtime, mtime))
    assert [x.time for x in read_file(path, now=NOW).xids] == [mtime - 1_999_900]
    assert read_file(path, now=NOW, lookback_s=7200).xids == []
    rebooted = tmp_path / "rebooted"
    rebooted.write_text(f"[500000.000000] {XID_79}\n[    5.000000] {NOISE}\n"
                        f"[   90.000000] {XID_79}\n[ 3000.000000] {NOISE}\n")
    os.utime(rebooted, (mtime, mtime))
    assert [x.time for x in read_file(rebooted, now=NOW).xids] == [mtime - 3001, mtime - 2910]
