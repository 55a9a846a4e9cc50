"""The nccl-tests output parser on a real run and the all-reduce collector through a
runner (agent/collectors/allreduce.py); nccl.allreduce is judged in
tests/checks/nccl/test_allreduce.py."""

from __future__ import annotations

import time
from pathlib import Path

from clusterdiag.agent.collectors import allreduce as collector
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.nccl import AllreduceRun
from clusterdiag.agent.read.sources import CommandResult, SourceEnv

REAL = Path(__file__).resolve().parents[1] / "fixtures/nccl/all_reduce_perf_h100_2x8.txt"


def test_parser_reads_the_real_h100_output() -> None:
    run = AllreduceRun()
    collector.parse_output(REAL.read_text(), run)
    assert run.size_bytes == 8589934592
    assert run.busbw_gbps == 338.82  # best of out-of-place 338.82 / in-place 337.35
    assert run.avg_busbw_gbps == 70.742
    assert run.wrong == 0


def test_parser_counts_wrong_results_and_ignores_foreign_lines() -> None:
    text = ("NCCL INFO something 1 2 3 4 5 6 7 8 9 10 11 12\n"
            "  1073741824  268435456  float  sum  -1  6759.0  158.86  297.86  3  6737.4  159.37"
            "  298.82  0\n")
    run = AllreduceRun()
    collector.parse_output(text, run)
    assert run.wrong == 3
    assert run.busbw_gbps == 298.82


def test_no_table_leaves_values_unknown() -> None:
    run = AllreduceRun()
    collector.parse_output("all_reduce_perf: CUDA failure 'no CUDA-capable device'\n", run)
    assert run.busbw_gbps is None
    assert run.wrong is None


def _env(tmp_path: Path, answer: CommandResult, planned: bool = True) -> tuple[SourceEnv, list]:
    for bdf in ("0000:1b:00.0", "0000:43:00.0"):
        (tmp_path / "proc/driver/nvidia/gpus" / bdf).mkdir(parents=True)
    calls: list = []

    def runner(argv: list[str], timeout_s: float) -> CommandResult:
        calls.append((argv, timeout_s))
        return answer

    params = {"nccl.allreduce": {"program": None, "args": None}} if planned else {}
    return SourceEnv(root=tmp_path, runner=runner, params=params), calls


def test_collector_runs_on_every_local_gpu_within_the_deadline(tmp_path: Path) -> None:
    env, calls = _env(tmp_path, CommandResult([], 0, REAL.read_text()))
    run = collector.collect(env, SourceStats(), time.monotonic() + 30)
    assert run is not None
    assert run.busbw_gbps == 338.82
    ((argv, timeout_s),) = calls
    assert argv[0] == "all_reduce_perf"
    assert argv[-2:] == ["-g", "2"]
    assert timeout_s <= 30


def test_collector_does_nothing_unless_the_check_is_planned(tmp_path: Path) -> None:
    env, calls = _env(tmp_path, CommandResult([], 0, ""), planned=False)
    assert collector.collect(env, SourceStats(), time.monotonic() + 30) is None
    assert calls == []
