"""An active test: nccl-tests' ``all_reduce_perf`` on every local GPU, through the runner.

This source is collected only when ``nccl.allreduce`` runs (``--level full``), since it
occupies every GPU for seconds. The parser reads the table nccl-tests prints (columns
size, count, type, redop, root, then time/algbw/busbw/#wrong out-of-place and in-place).
"""

from __future__ import annotations

import contextlib
import time

from ..model import SourceStats
from ..model.nccl import AllreduceRun
from ..read.sources import SourceEnv
from ..read.sysfs import list_dir, under

DEFAULT_ARGS = ("-b", "512M", "-e", "1G", "-f", "2", "-w", "5", "-n", "20")
_ROW_FIELDS = 13  # size count type redop root + 2 x (time algbw busbw #wrong)


def parse_output(text: str, run: AllreduceRun) -> None:
    """Fill busbw (best of out-of-place/in-place at the largest size), #wrong and the
    tool's average from an all_reduce_perf output."""
    wrong = 0
    rows = 0
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("# Avg bus bandwidth"):
            with contextlib.suppress(IndexError, ValueError):
                run.avg_busbw_gbps = float(line.split(":", 1)[1].split()[0])
            continue
        if line.lstrip().startswith("#") or len(fields) != _ROW_FIELDS:
            continue
        try:
            size = int(fields[0])
            busbw = max(float(fields[7]), float(fields[11]))
            wrong += int(fields[8]) + int(fields[12])
        except ValueError:
            continue  # "N/A" in #wrong when validation is off, or a foreign line
        rows += 1
        if run.size_bytes is None or size >= run.size_bytes:
            run.size_bytes, run.busbw_gbps = size, busbw
    if rows:
        run.wrong = wrong


def local_gpu_count(env: SourceEnv) -> int:
    return len(list_dir(under(env.root, "/proc/driver/nvidia/gpus")))


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> AllreduceRun | None:
    if "nccl.allreduce" not in env.params:
        stats.status = "not_collected"  # neither read nor failed: `nothing_read` skips it
        return None  # a plain snapshot must never occupy the GPUs
    program = str(env.wants("nccl.allreduce", "program") or "all_reduce_perf")
    args = [str(a) for a in env.wants("nccl.allreduce", "args") or DEFAULT_ARGS]
    gpus = local_gpu_count(env)
    run = AllreduceRun(argv=[program, *args, "-g", str(max(gpus, 1))])
    left = deadline - time.monotonic() - 0.2
    if left <= 1.0:
        run.error = "no time left in the budget (raise --budget for --level full)"
        return run
    stats.calls += 1
    result = env.runner(run.argv, left)
    run.returncode, run.error = result.returncode, result.error
    run.output_tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
    if result.returncode is not None:
        parse_output(result.stdout, run)
    return run
