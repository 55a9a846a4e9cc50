"""gpu-burn (wilicc/gpu-burn): per-GPU Gflop/s from the last progress line, and the verdict
from the closing ``Tested N GPUs:`` block — the program exits 0 even when a GPU is FAULTY,
so the block, the ``errors:`` counts and ``(DIED!)`` decide (gpu_burn-drv.cpp)."""

from __future__ import annotations

import re

from ...model.qualify import Evidence, Figure, ToolRun
from .lines import clean_lines

_PROGRESS = re.compile(r"proc'd:(.*?)errors:(.*?)(?:temps:|$)")
_GFLOPS = re.compile(r"\(([0-9.]+) Gflop/s\)")
_TESTED = re.compile(r"^Tested (\d+) GPUs:")
_VERDICT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)")
MARKERS = (re.compile(r"proc'd:.*Gflop/s"), _TESTED, re.compile(r"^Burning for \d+ seconds"))


def parse(text: str, run: ToolRun) -> None:
    last: tuple[str, str] | None = None
    tested = False
    for line in clean_lines(text):
        for match in _PROGRESS.finditer(line):
            last = (match.group(1), match.group(2))
        if "(DIED!)" in line or "No clients are alive" in line:
            run.evidence.append(Evidence("fail", "node", line.strip()[:200]))
        if _TESTED.match(line):
            tested = True
        verdict = _VERDICT.match(line)
        if tested and verdict and verdict.group(2) == "FAULTY":
            run.evidence.append(Evidence("fail", f"gpu{verdict.group(1)}",
                                         f"gpu_burn marked GPU {verdict.group(1)} FAULTY"))
    run.complete = tested
    if last is None:
        run.notes.append("no gpu_burn progress line")
        return
    for gpu, gflops in enumerate(_GFLOPS.findall(last[0])):
        run.figures.append(Figure(run.node, "gpu_compute", f"gpu{gpu}", [float(gflops)],
                                  "Gflop/s", "gpu_burn", "last progress line"))
    for gpu, errors in enumerate(last[1].split(" - ")):
        count = errors.split()[0] if errors.split() else "0"
        if count.isdigit() and int(count):
            run.evidence.append(Evidence("fail", f"gpu{gpu}",
                                         f"gpu_burn counted {count} computation errors"))
