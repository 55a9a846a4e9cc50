"""Parsing a 1,000,000-line kernel log beside a minimal Xid/SXid/kernel-error parser, and
the whole `clusterdiag run --kernel-log` on it judged inside the source's deadline.

    .venv/bin/python bench/kernel_log_parse.py [--json] [--lines N]

The log is written once: ISO-stamped lines over the last 24 h (half of them inside the
2 h look-back window), 1 % Xid, 0.2 % SXid and 0.2 % AER lines among ordinary kernel
chatter. The anchor is what a grep-style tool does (gpud's and NHC's way): read each line,
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

NOISE = (
    "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping",
    "systemd[1]: Started Session 4211 of user slurm.",
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
    "audit: type=1400 audit(1700000000.123:88): apparmor=\"STATUS\" operation=\"profile_load\"",
    "TCP: request_sock_TCP: Possible SYN flooding on port 6818. Sending cookies.",
    "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate",
)
XID = ("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of "
       "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC).")
SXID = "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"
# The kernel source's deadline (3 s) less the margin it keeps to hand back what it read
# (agent/collectors/kernel.py): past it, the rest of the file is not read (and said so).
USABLE_S = 2.7
AER = "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"


def _lines_arg() -> int:
    args = sys.argv[1:]
    return int(args[args.index("--lines") + 1]) if "--lines" in args else 1_000_000


def write_log(path: Path, lines: int, now: float) -> dict[str, int]:
    """The log, oldest first; how many Xid/SXid/AER lines it holds in all and in the window."""
    counts = {"xid": 0, "sxid": 0, "aer": 0, "xid_recent": 0}
    span = 86400.0
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            at = now - span + span * i / lines
            stamp = datetime.fromtimestamp(at, timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S,%f+00:00")
            if i % 100 == 7:
                message = XID
                counts["xid"] += 1
                counts["xid_recent"] += at >= now - 7200
            elif i % 500 == 11:
                message, counts["sxid"] = SXID, counts["sxid"] + 1
            elif i % 500 == 13:
                message, counts["aer"] = AER, counts["aer"] + 1
            else:
                message = NOISE[i % len(NOISE)]
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
from clusterdiag.agent import kernel_log
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


def main() -> None:
    lines = _lines_arg()
    work = Path(tempfile.mkdtemp(prefix="clusterdiag-bench-klog-"))
    try:
        now = time.time()
        log = work / "kern.log"
        written = write_log(log, lines, now)
        with plain_install(work / "install") as install:
            print(install_note(install), file=sys.stderr)
            anchor_found: dict[str, int] = {}

            def anchor() -> None:
                anchor_found.update(anchor_parse(log))

            anchor_s = median_call(anchor, runs=3)
            if anchor_found["xid"] != written["xid"] or anchor_found["sxid"] != written["sxid"]:
                fail(f"the anchor parser found {anchor_found}, the log holds {written}")
            windowed = clusterdiag_parse(install.python, log, now, 7200.0, 3)
            if windowed["xids"] != written["xid_recent"] or windowed["unknown"]:
                fail(f"clusterdiag kept {windowed['xids']} Xids ({windowed['unknown']}), "
                     f"the window holds {written['xid_recent']}")
            everything = clusterdiag_parse(install.python, log, now, None, 1)
            if (everything["xids"], everything["sxids"]) != (written["xid"], written["sxid"]):
                fail(f"snapshot parse found {everything}, the log holds {written}")
            run_s, stats = judged_run(install.clusterdiag, log)
        label = f"{lines:,}-line kernel log"
        wall, every = float(windowed["s"]), float(everything["s"])
        emit([
            Figure(f"{label}: minimal Xid/SXid/kernel-error parser", round(anchor_s, 2), "s"),
            Figure(f"{label}: clusterdiag parse, 2 h window (run/agent/prolog)",
                   round(wall, 2), "s", goal="<= 2x the minimal parser",
                   baseline="minimal parser", ratio=wall / anchor_s),
            Figure(f"{label}: clusterdiag peak RSS, 2 h window",
                   round(windowed["rss_kb"] / 1024, 1), "MiB", goal="bounded by the window"),
            Figure(f"{label}: every matching line (snapshot --kernel-log)", round(every, 2),
                   "s", baseline="minimal parser", ratio=every / anchor_s),
            Figure(f"{label}: peak RSS keeping every matching line",
                   round(everything["rss_kb"] / 1024, 1), "MiB"),
            Figure(f"{label}: whole log parsed inside the kernel source's deadline "
                   f"({USABLE_S:g} s usable)", round(wall, 2), "s", goal=f"<= {USABLE_S:g} s"),
            Figure(f"{label}: `clusterdiag run` kernel source, status ok",
                   round(float(stats.get("seconds", 0.0)), 2), "s",
                   goal="< 3 s deadline, never error"),
            Figure(f"{label}: `clusterdiag run --kernel-log` wall, judged", round(run_s, 2),
                   "s"),
        ])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
