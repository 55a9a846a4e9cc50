"""nccl.allreduce's verdicts (checks/nccl/allreduce.py)."""

from __future__ import annotations

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.nccl import AllreduceRun
from clusterdiag.checks.core.finding import Status
from tests.checks.harness import run_check


def _judge(run: AllreduceRun | None, profile: str = "dgx-h100") -> list:
    snap = Snapshot(node="n", taken_at=0.0, allreduce=run)
    return run_check("nccl.allreduce", snap, profile=profile, level="full")


def test_check_verdicts() -> None:
    assert _judge(None)[0].status is Status.SKIP
    absent = AllreduceRun(error="all_reduce_perf: not found")
    assert _judge(absent)[0].status is Status.SKIP
    timed_out = AllreduceRun(error="all_reduce_perf: no answer within 8 s")
    assert _judge(timed_out)[0].status is Status.ERROR
    slow = AllreduceRun(returncode=0, busbw_gbps=297.86, size_bytes=1 << 30, wrong=0)
    assert _judge(slow)[0].status is Status.FAIL  # below 0.9 x 360 GB/s on a DGX H100
    fast = AllreduceRun(returncode=0, busbw_gbps=420.0, size_bytes=8 << 30, wrong=0)
    assert _judge(fast)[0].status is Status.PASS
    wrong = AllreduceRun(returncode=0, busbw_gbps=420.0, wrong=2)
    (finding,) = _judge(wrong)
    assert finding.status is Status.FAIL
    assert finding.action.value == "drain"
    crashed = AllreduceRun(returncode=1, output_tail="CUDA failure")
    assert _judge(crashed)[0].status is Status.FAIL
    assert _judge(fast, "generic")[0].status is Status.PASS  # no expectation to compare
