"""Parsing 10 k / 100 k / 1 M-line kernel logs beside a minimal Xid/SXid/kernel-error
parser, and the whole `clusterdiag run --kernel-log` on the last judged inside the
source's deadline.

    .venv/bin/python bench/kernel_log_parse.py [--json] [--lines N]

Two logs per size, ISO-stamped lines over the last 24 h (a twelfth inside the 2 h
look-back window): real GPU-node chatter (gpud's dmesg captures) with 1 % Xid, 0.2 % SXid
and 0.2 % AER lines, and a log whose every line is an Xid (the events kept bound the
memory). The file is read newest first, so the judging path reads the window and stops.
The anchor is what a grep-style tool does (gpud's and NHC's way): read each line,
test two or three substrings, run one regex on the lines that hold them. clusterdiag is
timed in its own process (the run path: window applied) with its peak RSS, so the log's
length can be seen not to set the memory; each figure checks that the parse found the
events written.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from common import Figure, emit, fail, install_note, median_call, plain_install

REPO = Path(__file__).resolve().parents[1]
# Real GPU-node chatter: the non-event lines of gpud's dmesg captures (tests/fixtures/
# kernel_log, Apache-2.0), their prefixes cut so each line gets this log's own stamp.
_NOISE_FILES = ("gpud_dmesg.0.log", "gpud_dmesg-with-xid-119.log",
                "gpud_memory_dmesg.decode.iso.log")
_PREFIX = re.compile(r"^(?:kern\s*:\w+\s*: )?(?:\[[^\]]*\]\s*|\S+T\S+\s+)?")
_NEEDLES = ("NVRM", "SXid", "mce", "Machine check", "INFO: task", "lockup", "LOCKUP", "NMI",
            "Power fault", "insufficient power", "emperature", "mlx5", "AER", "PCIe Bus")


def real_noise() -> list[str]:
    """Distinct real kernel lines that match no event pattern."""
    found: dict[str, None] = {}
    for name in _NOISE_FILES:
        text = (REPO / "tests" / "fixtures" / "kernel_log" / name).read_text(errors="replace")
        for line in text.splitlines():
            message = _PREFIX.sub("", line).strip()
            if message and not any(n in message for n in _NEEDLES):
                found[message] = None
    return list(found)


XID = ("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of "
       "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC).")
SXID = "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"
# The kernel source's deadline (3 s) less the margin it keeps to hand back what it read
# (agent/collectors/kernel.py): past it, the rest of the file is not read (and said so).
USABLE_S = 2.7
AER = "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"


def _sizes_arg() -> list[int]:
    args = sys.argv[1:]
    if "--lines" in args:
        return [int(args[args.index("--lines") + 1])]
    return [10_000, 100_000, 1_000_000]


def write_log(path: Path, lines: int, now: float, noise: list[str],
              all_xid: bool = False) -> dict[str, int]:
    """The log, oldest first; how many Xid/SXid/AER lines it holds in all and in the window.
    ``all_xid``: every line an Xid (the worst case for the events kept)."""
    counts = {"xid": 0, "sxid": 0, "aer": 0, "xid_recent": 0}
    span = 86400.0
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            at = now - span + span * i / lines
            stamp = datetime.fromtimestamp(at, timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S,%f+00:00")
            if all_xid or i % 100 == 7:
                message = XID
                counts["xid"] += 1
                counts["xid_recent"] += at >= now - 7200
            elif i % 500 == 11:
                message, counts["sxid"] = SXID, counts["sxid"] + 1
            elif i % 500 == 13:
                message, counts["aer"] = AER, counts["aer"] + 1
            else:
                message = noise[i % len(noise)]
            out.write(f"{stamp} {message}\n")
    return counts


_ANCHOR_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)[^)]*\): (\d+)")
_ANCHOR_SXID = re.compile(r"SXid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+)")
_ANCHOR_ERRORS = ("AER: ", "mce: ", "soft lockup", "blocked for more than")


def anchor_parse(path: Path) -> dict[str, int]:
    """The minimal parser: substring tests, then one regex on the lines that pass."""
    found = {"xid": 0, "sxid": 0, "errors": 0}
    with path.open("rb") as handle:
        for raw in handle:
            line = raw.decode("utf-8", errors="replace")
            if "Xid" in line:
                if _ANCHOR_XID.search(line):
                    found["xid"] += 1
                elif _ANCHOR_SXID.search(line):
                    found["sxid"] += 1
            elif any(word in line for word in _ANCHOR_ERRORS):
                found["errors"] += 1
    return found


_CHILD = """
import json, resource, sys, time
from clusterdiag.agent.collectors import kernel_log
started = time.perf_counter()
log = kernel_log.read_file(sys.argv[1], lookback_s=%(lookback)s, now=float(sys.argv[2]))
seconds = time.perf_counter() - started
print(json.dumps({"s": seconds, "xids": len(log.xids), "sxids": len(log.sxids),
                  "events": len(log.events), "lines": log.lines_read,
                  "unknown": log.unknown, "rss_kb": resource.getrusage(
                      resource.RUSAGE_SELF).ru_maxrss}))
"""


def clusterdiag_parse(python: str, path: Path, now: float, lookback: float | None,
                      runs: int) -> dict[str, Any]:
    """clusterdiag's reader in a fresh process per run: the median time, the last run's
    counts and the largest peak RSS."""
    results = []
    for _ in range(runs):
        proc = subprocess.run([python, "-c", _CHILD % {"lookback": lookback}, str(path),
                               str(now)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            fail(f"clusterdiag's parser exited {proc.returncode}: {proc.stderr[-300:]}")
        results.append(json.loads(proc.stdout))
    results.sort(key=lambda r: float(r["s"]))
    median = dict(results[len(results) // 2])
    median["rss_kb"] = max(int(r["rss_kb"]) for r in results)
    return median


def judged_run(clusterdiag: str, path: Path) -> tuple[float, dict[str, Any]]:
    """`clusterdiag run --kernel-log` on the log: wall time and the kernel source's stats."""
    started = time.perf_counter()
    proc = subprocess.run([clusterdiag, "run", "--simulate", "dgx-h100", "--kernel-log",
                           str(path), "--format", "json", "--checks", "gpu.xid,nvswitch.sxid,"
                           "host.kernel_errors"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        fail(f"clusterdiag run exited {proc.returncode} without a report: {proc.stderr[-300:]}")
    stats = report.get("sources", {}).get("kernel_log", {})
    errors = [f for f in report.get("findings", []) if f.get("status") == "error"]
    if stats.get("status") != "ok" or errors:
        fail(f"kernel log not judged: source {stats}, error findings {errors[:2]}")
    return wall, stats


def measure(install: Any, log: Path, lines: int, now: float, all_xid: bool,
            noise: list[str]) -> list[Figure]:
    """One log: the minimal parser, the windowed (judging) read and the full read."""
    written = write_log(log, lines, now, noise, all_xid)
    anchor_found: dict[str, int] = {}

    def anchor() -> None:
        anchor_found.update(anchor_parse(log))

    anchor_s = median_call(anchor, runs=3)
    if anchor_found["xid"] != written["xid"] or anchor_found["sxid"] != written["sxid"]:
        fail(f"the anchor parser found {anchor_found}, the log holds {written}")
    windowed = clusterdiag_parse(install.python, log, now, 7200.0, 3)
    if windowed["xids"] != min(written["xid_recent"], 4096) or windowed["unknown"]:
        fail(f"clusterdiag kept {windowed['xids']} Xids ({windowed['unknown']}), "
             f"the window holds {written['xid_recent']}")
    everything = clusterdiag_parse(install.python, log, now, None, 1)
    if (everything["xids"], everything["sxids"]) != (written["xid"], written["sxid"]):
        fail(f"snapshot parse found {everything}, the log holds {written}")
    label = f"{lines:,}-line {'all-Xid' if all_xid else 'real-noise'} log"
    wall, every = float(windowed["s"]), float(everything["s"])
    return [
        Figure(f"{label}: minimal single-regex parser", round(anchor_s, 3), "s"),
        Figure(f"{label}: clusterdiag judging path (2 h window, run/agent/prolog)",
               round(wall, 3), "s", goal="<= 2x the minimal parser",
               baseline="minimal parser", ratio=wall / anchor_s),
        Figure(f"{label}: clusterdiag peak RSS, judging path",
               round(windowed["rss_kb"] / 1024, 1), "MiB", goal="<= 64 MiB"),
        Figure(f"{label}: every matching line (snapshot --kernel-log)", round(every, 3),
               "s", baseline="minimal parser", ratio=every / anchor_s),
        Figure(f"{label}: peak RSS keeping every matching line",
               round(everything["rss_kb"] / 1024, 1), "MiB"),
    ]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="clusterdiag-bench-klog-"))
    noise = real_noise()
    try:
        now = time.time()
        log = work / "kern.log"
        figures: list[Figure] = []
        with plain_install(work / "install") as install:
            print(install_note(install), file=sys.stderr)
            for lines in _sizes_arg():
                for all_xid in (False, True):
                    figures += measure(install, log, lines, now, all_xid, noise)
            run_s, stats = judged_run(install.clusterdiag, log)
        figures += [
            Figure("last log: `clusterdiag run` kernel source, status ok",
                   round(float(stats.get("seconds", 0.0)), 2), "s",
                   goal=f"< 3 s deadline ({USABLE_S:g} s usable), never error"),
            Figure("last log: `clusterdiag run --kernel-log` wall, judged", round(run_s, 2),
                   "s"),
        ]
        emit(figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
