"""perftest ``ib_write_bw`` (and the other ``*_bw`` tests) as it prints them.

The unit comes from the result header: ``MB/sec`` (perftest < 24.07) and ``MiB/sec`` are
2^20 bytes, ``Gb/sec`` (``--report_gbits``) is 10^9 bits (linux-rdma/perftest); figures are
reported in Gb/s. When server and client share a log (same-host loopback) their blocks
interleave: the rows after the last ``#bytes`` header are the client's. A bidirectional
test reports the sum of both directions, so its figure is halved to one direction.
"""

from __future__ import annotations

import re

from ...model.qualify import Evidence, Figure, ToolRun
from .lines import NUMBER, numbered_lines, pick, reading

_BANNER = re.compile(r"^\s*(RDMA_Write|RDMA_Read|Send|Atomic)\s.*BW Test")
_DEVICE = re.compile(r"Device\s*:\s*(\S+)")
_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(\S+?)\]\s+BW average\[(\S+?)\]")
_ROW = re.compile(rf"^\s*(\d+)\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})")
_FAILURES = re.compile(r"Failed to modify QP|Couldn't allocate|Completion with error|Error: ")
# The test could not be set up, which says nothing of the rail: the client could not reach
# its server over TCP (perftest_communication.c "Couldn't connect to %s:%d", no retry), an
# option this build lacks (a perftest built without CUDA refuses --use_cuda:
# perftest_parameters.c "Invalid Command or flag"), or the device could not be opened
# (perftest_resources.c "Did not detect devices", "IB device %s not found"): the passive
# InfiniBand checks judge the device itself.
_SETUP = re.compile(r"Couldn't connect to|Unable to init the socket connection|"
                    r"Unable to open file descriptor|unrecognized option|"
                    r"Invalid Command or flag|Parser function exited with Error|"
                    r"Did not detect devices|IB device \S+ not found|"
                    r"Unable to find the Infiniband/RoCE device|No IB devices found|"
                    r"Couldn't get context")
MARKERS = (_BANNER, _HEADER)
_TO_GBPS = {"MB/sec": 1048576 * 8 / 1e9, "MiB/sec": 1048576 * 8 / 1e9, "Gb/sec": 1.0}


def parse(text: str, run: ToolRun, port: int = 1) -> None:
    device = None
    banner_bidirectional = bidirectional = False
    unit = None
    rows: list[tuple[int, float, int]] = []  # size, BW average, line
    ended = closed = False
    for number_, line in numbered_lines(text):
        if _BANNER.match(line):
            banner_bidirectional = "Bidirectional" in line
            continue
        if device is None and (found := _DEVICE.search(line)):
            device = found.group(1)
        if _SETUP.search(line):
            run.evidence.append(Evidence("error", "node", f"line {number_}: {line.strip()}"))
        elif _FAILURES.search(line):
            run.evidence.append(Evidence("fail", "node", f"line {number_}: {line.strip()}"))
        header = _HEADER.match(line)
        if header:  # the block after the last header is the client's
            unit, bidirectional = header.group(2), banner_bidirectional
            rows, ended, closed = [], False, False
            continue
        row = _ROW.match(line)
        if row and unit is not None and not ended:
            average = reading(row.group(4))
            if average is not None:
                rows.append((int(row.group(1)), average, number_))
        elif rows and not ended:  # the table ends at its closing rule, or is cut short
            ended, closed = True, line.strip().startswith("-----")
    if unit not in _TO_GBPS or not rows:
        run.notes.append("no perftest result rows" if unit is None or not rows
                         else f"unknown unit {unit}")
        return
    run.complete = closed
    size = max(s for s, _, _ in rows)
    read = [(v, at) for s, v, at in rows if s == size]
    best = pick([v for v, _ in read])
    found_at = next(at for v, at in read if v is best)
    average = best * _TO_GBPS[unit]
    detail = f"BW average at {size} B" + ("" if closed else ", output cut short")
    if bidirectional:
        average /= 2
        detail += ", bidirectional sum halved"
    component = f"{device}/{port}" if device else "node"
    run.figures.append(Figure(run.node, run.test, component, [average], "Gb/s", "perftest",
                              detail, found_at))
