"""How the kernel log is read: the substring prefilter, blocks, the look-back window, the
cap on kept events and the source deadline (agent/collectors/kernel_log.py's reading half).

The prefilter is held to the parser itself: every line of every corpus the tests know
gives the same events read through the prefilter and blocks as fed to the parser one by
one with no filter at all, so a pattern added without its literal fails here.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import kernel_log
from clusterdiag.agent.collectors.kernel_log import read_file, read_kmsg
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.agent.model.serde import to_jsonable
from tests.real import SHARED_REAL
from tests.unit import test_kernel_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log"
REAL_XID = SHARED_REAL / "xid"  # read where the shared real-data set is checked out
NOW = 1_750_000_000.0
XID_LINE = ("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s "
            "of waiting for RPC response from GPU4 GSP!")


def _cases(test: object) -> list[str]:
    """The lines a parametrized test of test_kernel_log.py holds (each case's first value)."""
    (mark,) = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
    return [case[0] if isinstance(case, tuple) else case for case in mark.args[1]]


def _corpora(tmp: Path) -> list[Path]:
    found = sorted(p for p in FIXTURES.iterdir() if p.suffix in (".txt", ".log"))
    if REAL_XID.is_dir():
        found += sorted(p for p in REAL_XID.rglob("*") if p.suffix in (".txt", ".log"))
    cases = tmp / "test_kernel_log_cases.txt"
    cases.write_text("\n".join(_cases(test_kernel_log.test_kernel_event_kinds)
                               + _cases(test_kernel_log.test_lines_that_are_not_events)) + "\n")
    return [*found, cases]


def _unfiltered(path: Path) -> KernelLog:
    """Every line straight to the parser: what the prefilter must not change."""
    log = KernelLog(source=f"file:{path}")
    parser = kernel_log._Parser(None, NOW, log)
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        log.lines_read += 1
        parser.feed(line)
    return log


def _untimed(log: KernelLog) -> dict[str, object]:
    """The log as JSON without the times a file read gives lines that print none."""
    data = to_jsonable(log)
    for kind in ("xids", "sxids", "events"):
        for event in data[kind]:
            event.pop("time")
    data["unknown"].pop("time", None)
    return data


def test_prefilter_and_blocks_change_no_event(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for path in _corpora(tmp_path):
        reference = _unfiltered(path)
        want = _untimed(reference)
        assert want["lines_read"] > 0
        for size in (1 << 20, 97):  # 97: lines cut across blocks
            monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", size)
            got = read_file(path, now=NOW)
            assert _untimed(got) == want, path.name
            # Every line gets a time, and a printed time is kept as printed.
            pairs = list(zip(reference.xids, got.xids, strict=True))
            assert all(g.time is not None for _, g in pairs), path.name
            assert [g.time for r, g in pairs if r.time is not None] == [
                r.time for r, _ in pairs if r.time is not None], path.name


def test_the_corpora_hold_every_kind_of_event(tmp_path: Path) -> None:
    """The equivalence above means something only if the corpora exercise every pattern."""
    logs = [_unfiltered(p) for p in _corpora(tmp_path)]
    kinds = {e.kind for log in logs for e in log.events}
    assert kinds >= {"mce", "hung_task", "soft_lockup", "hard_lockup", "nmi", "gpu_reset",
                     "pcie_slot_power", "module_temperature", "mlx5_health", "aer"}
    assert any(x.xid == 79 and "\n" in x.raw for log in logs for x in log.xids)
    assert any(log.sxids for log in logs)


def test_a_skipped_line_between_fallen_records_breaks_them(tmp_path: Path) -> None:
    # CONSTRUCTED: the three-record Xid 79 with an unrelated line inside it is not one.
    path = tmp_path / "kern.log"
    path.write_text("NVRM: The NVIDIA GPU 0000:b3:00.0\nsystemd[1]: Started x.\n"
                    "NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
                    "NVRM: fallen off the bus and is not responding to commands.\n")
    log = read_file(path, now=NOW)
    assert log.xids == []
    assert log.lines_read == 4


def test_fallen_records_in_a_kmsg_file_span_dictionary_lines(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(
        "3,900,1843308145,-;NVRM: The NVIDIA GPU 0000:b3:00.0\n SUBSYSTEM=pci\n"
        "3,901,1843308146,-;NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        " DEVICE=+pci:0000:b3:00.0\n"
        "3,902,1843308147,-;NVRM: fallen off the bus and is not responding to commands.\n")
    log = read_kmsg(tmp_path, 1e12, now=NOW)
    assert [(x.xid, x.pci_bdf) for x in log.xids] == [(79, "0000:b3:00.0")]
    assert log.lines_read == 3


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(at))


def test_window_drops_dated_events_and_counts_them(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    lines = [f"{_iso(NOW - age)} {XID_LINE}" for age in (9000, 8000, 100, 50)]
    path.write_text("\n".join([*lines, XID_LINE]) + "\n")  # the last one is undated
    windowed = read_file(path, now=NOW, lookback_s=7200)
    # The undated line takes the time of the line before it.
    assert [x.time for x in windowed.xids] == [NOW - 100, NOW - 50, NOW - 50]
    assert windowed.dropped == 2
    assert windowed.lines_read == 5
    everything = read_file(path, now=NOW)
    assert (len(everything.xids), everything.dropped) == (5, 0)


def test_windowed_read_keeps_at_most_the_newest_events(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_log, "MAX_EVENTS", 10)
    monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", 4096)
    path = tmp_path / "kern.log"
    path.write_text("".join(f"[{i}.000000] {XID_LINE}\n" for i in range(1000)))
    log = read_file(path, now=NOW, lookback_s=7200)
    assert [x.uptime_s for x in log.xids] == [float(i) for i in range(990, 1000)]
    assert log.dropped == 990
    assert len(read_file(path, now=NOW).xids) == 1000  # snapshot: every matching line


def test_older_xids_are_not_parsed_once_the_newest_are_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log of nothing but Xids: once newer blocks hold the newest ``MAX_EVENTS``, older
    Xid lines are counted, not parsed, while other events in those blocks are still kept
    (the window's SXid and AER lines are not crowded out by Xids)."""
    monkeypatch.setattr(kernel_log, "MAX_EVENTS", 10)
    monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", 4096)
    parsed: list[int] = []
    add_xid = kernel_log._Parser._add_xid

    def counting(self: kernel_log._Parser, xid: int, *args: object, **kwargs: object) -> None:
        parsed.append(xid)
        add_xid(self, xid, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kernel_log._Parser, "_add_xid", counting)
    sxid = "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"
    aer = ("pcieport 0000:00:01.0: AER: Uncorrectable (Fatal) error message received from "
           "0000:9b:00.0")
    lines = [f"{_iso(NOW - 3000 + i)} {XID_LINE}" for i in range(1000)]
    lines[100] = f"{_iso(NOW - 2900)} {sxid}"
    lines[200] = f"{_iso(NOW - 2800)} {aer}"
    path = tmp_path / "kern.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_file(path, now=NOW, lookback_s=7200)
    assert [x.time for x in log.xids] == [NOW - 3000 + i for i in range(990, 1000)]
    assert [s.sxid for s in log.sxids] == [20034]
    assert [(e.kind, e.device) for e in log.events] == [("aer", "0000:9b:00.0")]
    assert log.dropped == 998 - 10
    assert len(parsed) < 100  # the newest blocks' Xids, not the other 900


def test_reading_stops_at_the_deadline_and_says_so(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", 4096)
    path = tmp_path / "kern.log"
    path.write_text("".join(f"[{i}.0] {XID_LINE}\n" for i in range(5000)))
    log = read_file(path, now=NOW, deadline=time.monotonic() - 1)
    assert 0 < log.lines_read < 5000
    assert len(log.xids) == log.lines_read
    assert log.unknown["file"].startswith("stopped at the source deadline after")
