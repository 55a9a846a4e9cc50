"""``dcgmi diag`` output: JSON (``-j``) of every generation, and the text table.

JSON is read as a stream of ``"key": value`` tokens rather than with ``json.loads``: the
shapes differ by generation (``gpu_ids`` strings in nvvs 1.x, ``gpu_id`` in DCGM 2/3,
integer ``entity_id`` and a per-test ``test_summary`` in DCGM 4, DCGM's
nvvs/include/NvvsJsonStrings.h) and a saved output is often cut short; every result is a
GPU id followed by its ``status`` inside the current test ``name``. Skip is never counted
as a pass. ``info`` lines that carry figures (FP64 Gflop/s of ``diagnostic``, PCIe
bandwidth) become figures.
"""

from __future__ import annotations

import re

from ...model.qualify import Evidence, Figure, ToolRun
from .lines import clean_lines

_TOKEN = re.compile(
    r'"(name|category|gpu_ids?|entity_id|status|warning|runtime_error|Overall Result)"\s*:\s*'
    r'("(?:[^"\\]|\\.)*"|-?\d+)')
_INFO_GFLOPS = re.compile(r"GPU (\d+) calculated at approximately ([0-9.]+) gigaflops")
_INFO_PCIE = re.compile(r"GPU (\d+) (GPU to Host|Host to GPU) bandwidth:(?:\\t|\s)*([0-9.]+) GB/s")
_TEXT_ROW = re.compile(r"^\|\s*([A-Za-z][\w /()-]*?)\s*\|\s*(Pass|Fail|Warn|Skip)\b([^|]*)\|")
_TEXT_CATEGORY = re.compile(r"^[|+]-+\s+(\w+)\s+-+")
_GPU_LIST = re.compile(r"GPU:?\s*([\d, ]+)")
MARKERS = (re.compile(r'"DCGM (?:GPU )?Diagnostic"'), re.compile(r"^\|\s*Diagnostic\s*\|\s*Result"))
# Deployment tests judge the software set-up, not the GPUs.
_CONFIG_TESTS = {"Deployment", "software"}


def _ids(value: str) -> list[str]:
    return [f"gpu{v.strip()}" for v in value.strip('"').split(",") if v.strip().isdigit()]


def _result(run: ToolRun, test: str, category: str, components: list[str], status: str,
            why: str) -> None:
    status = status.strip('"').lower()
    kind = {"fail": "fail", "warn": "warn", "skip": "skip", "pass": "pass"}.get(status)
    if kind is None:
        return
    config = category in _CONFIG_TESTS or test in _CONFIG_TESTS
    for component in components or ["node"]:
        text = f"{test}: {status}" + (f" ({why})" if why else "")
        run.evidence.append(Evidence(f"config_{kind}" if config and kind == "fail" else kind,
                                     component, text, test))


def _json(text: str, run: ToolRun) -> bool:
    test, category = "", ""
    pending: list[str] = []
    last: Evidence | None = None
    seen = per_gpu = False
    for match in _TOKEN.finditer(text):
        key, value = match.group(1), match.group(2)
        seen = True
        if key == "category":
            category = value.strip('"')
        elif key == "name":
            test, pending, last, per_gpu = value.strip('"'), [], None, False
        elif key in ("gpu_id", "gpu_ids", "entity_id"):
            pending, per_gpu = _ids(value), True
        elif key == "status" and not pending and per_gpu:
            pass  # DCGM 4's test_summary: its GPUs' results again, already counted
        elif key == "status":
            _result(run, test, category, pending, value, "")
            last = run.evidence[-1] if run.evidence else None
            pending = []
        elif key == "warning" and last is not None and last.test == test:
            last.text += f" ({value.strip(chr(34))[:200]})"
        elif key == "runtime_error":
            run.evidence.append(Evidence("fail", "node", f"runtime_error: {value[:200]}"))
    for gpu, gflops in _INFO_GFLOPS.findall(text):
        run.figures.append(Figure(run.node, "gpu_compute", f"gpu{gpu}", [float(gflops)],
                                  "Gflop/s", "dcgmi", "diagnostic FP64 GEMM"))
    for gpu, direction, value in _INFO_PCIE.findall(text):
        test_ = "h2d" if direction == "Host to GPU" else "d2h"
        run.figures.append(Figure(run.node, test_, f"gpu{gpu}", [float(value)], "GB/s",
                                  "dcgmi", "pcie plugin"))
    return seen


def _text(text: str, run: ToolRun) -> tuple[bool, bool]:
    seen = closed = False
    category = ""
    for line in clean_lines(text):
        cat = _TEXT_CATEGORY.match(line)
        if cat:
            category = cat.group(1)
            continue
        row = _TEXT_ROW.match(line)
        if row:
            seen, closed = True, False
            name, status, rest = row.group(1), row.group(2), row.group(3)
            gpus = _GPU_LIST.search(rest)
            components = _ids(gpus.group(1)) if gpus and status != "Pass" else []
            _result(run, name, category, components, status, rest.strip(" -"))
        elif seen and re.match(r"^\+[-+=]+\+$", line.strip()):
            closed = True
    return seen, closed


def parse(text: str, run: ToolRun) -> None:
    seen_json = _json(text, run)
    seen_text, closed = _text(text, run)
    balanced = text.count("{") == text.count("}") and text.count("[") == text.count("]")
    run.complete = (seen_json and balanced) or (seen_text and closed and not seen_json)
    if not seen_json and not seen_text:
        run.notes.append("no dcgmi diag results")
    elif not run.complete:
        run.notes.append("the output is cut short")
