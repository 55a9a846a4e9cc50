"""gpu-burn (wilicc/gpu-burn): per-GPU Gflop/s from the last progress line, and the verdict
from the closing ``Tested N GPUs:`` block — the program exits 0 even when a GPU is FAULTY,
so the block, the ``errors:`` counts and ``(DIED!)`` decide (gpu_burn-drv.cpp).

gpu_burn rejects no argument: it tests each for the substrings ``-h``, ``-l``, ``-d`` and
``-tc`` (gpu_burn-drv.cpp:826-856), so a compare path holding one is read as an option,
and it prints back what it took instead (gpu_burn-drv.cpp:913-914). :func:`as_asked`
holds a run to those two lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...model.qualify import Evidence, Figure, ToolRun
from .lines import NUMBER, numbered_lines

_PROGRESS = re.compile(r"proc'd:(.*?)errors:(.*?)(?:temps:|$)")
_GFLOPS = re.compile(rf"\(({NUMBER}) Gflop/s\)")  # "%d (%.0f Gflop/s) ", drv.cpp:555
_TESTED = re.compile(r"^Tested (\d+) GPUs:")
_VERDICT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)")
MARKERS = (re.compile(r"proc'd:.*Gflop/s"), _TESTED, re.compile(r"^Burning for \d+ seconds"))
# What it says it took (gpu_burn-drv.cpp:913-914). Printed before the fork, each line may
# come twice (a child inherits the unflushed buffer), and after "Run length not specified
# in the command line. " (drv.cpp:910, no newline) when it found no seconds.
_COMPARE = re.compile(r"Using compare file: (.*)$")
_BURNING = re.compile(r"Burning for (-?\d+) seconds\.")
_NO_LENGTH = "Run length not specified in the command line."
# The test could not start, which says nothing of a GPU's compute: CUDA would not start
# ("Couldn't init CUDA: ...", drv.cpp:318, from cuInit's answer; "No CUDA devices", :739-740,
# exit ENODEV), or a GPU's test could not be set up ("Couldn't init a GPU test: ...",
# :342-343, exit EMEDIUMTYPE: a compare kernel it cannot find or load, :240-246, a context
# or memory CUDA would not give). The passive checks judge a GPU CUDA cannot use; then
# "No clients are alive" (:604) is that failure's end, not a GPU dying mid-burn.
_CANNOT_START = re.compile(r"^(?:Couldn't init CUDA: |No CUDA devices|Couldn't init a GPU "
                           r"test: )")


def parse(text: str, run: ToolRun) -> None:
    last: tuple[str, str, int] | None = None
    tested = False
    started = True
    for number_, line in numbered_lines(text):
        for match in _PROGRESS.finditer(line):
            last = (match.group(1), match.group(2), number_)
        if _CANNOT_START.match(line.strip()):
            started = False
            run.evidence.append(Evidence("error", "node", f"line {number_}: {line.strip()}"))
        elif "(DIED!)" in line or ("No clients are alive" in line and started):
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
                                  "Gflop/s", "gpu_burn", "last progress line", last[2]))
    for gpu, errors in enumerate(last[1].split(" - ")):
        count = errors.split()[0] if errors.split() else "0"
        if count.isdigit() and int(count):
            run.evidence.append(Evidence("fail", f"gpu{gpu}",
                                         f"gpu_burn counted {count} computation errors"))


def asked(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """The compare file (``-c PATH``) and the seconds (the bare number last) of a planned
    gpu_burn command line (checks/qualify/active.py GPU_BURN), None where absent."""
    args = list(argv[1:])
    compare = args[args.index("-c") + 1] if "-c" in args[:-1] else None
    seconds = args[-1] if args and args[-1].isdigit() and (
        len(args) < 2 or args[-2] != "-c") else None
    return compare, seconds


def as_asked(text: str, argv: Sequence[str], run: ToolRun) -> None:
    """Accept the run only if its own lines say it used the compare file and burned for
    the seconds it was asked: otherwise it ran something else (a help text, a GPU list,
    another kernel, another length), which says nothing about the GPUs. Its figures and
    verdicts are then set aside (kept in the notes) and an ``error`` says what it used
    against what was asked."""
    compare, seconds = asked(argv)
    said_files = {m.group(1).rstrip() for m in map(_COMPARE.search, text.splitlines()) if m}
    said_seconds = set(_BURNING.findall(text))
    problems = []
    if compare is not None and said_files != {compare}:
        problems.append(f"asked -c {compare}, it used "
                        f"{', '.join(sorted(said_files)) or 'no compare file it named'}")
    if seconds is not None and said_seconds != {seconds}:
        problems.append(f"asked {seconds} s, it said "
                        + (", ".join(f"{s} s" for s in sorted(said_seconds))
                           or "nothing of how long it burned"))
    if _NO_LENGTH in text:
        problems.append("it found no seconds in its command line")
    if not problems:
        return
    set_aside = [f"{f.component} {f.value:g} {f.unit}" for f in run.figures] + [
        e.text for e in run.evidence if e.kind == "fail"]
    if set_aside:
        run.notes.append("not judged (gpu_burn did not run as asked): "
                         + "; ".join(set_aside)[:500])
    run.figures = []
    run.evidence = [Evidence("error", "node", "gpu_burn did not run as asked: "
                             + "; ".join(problems)),
                    *(e for e in run.evidence if e.kind != "fail")]
