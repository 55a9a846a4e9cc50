"""gpu.processes (checks/gpu/processes.py)."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.model.gpu import Gpu, GpuProcess
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import bad, make_gpu, make_snap, only, run


def _busy(index: int) -> Gpu:
    return make_gpu(index, processes=[GpuProcess(pid=4242, used_memory_bytes=2 << 30)])


def test_processes_left_before_a_job_fail_drain() -> None:
    findings = run("gpu.processes", make_snap([make_gpu(0), _busy(1)]), mode="prolog")
    assert [(f.component, f.status, f.action) for f in findings] == [
        ("gpu0", Status.PASS, Action.NONE), ("gpu1", Status.FAIL, Action.DRAIN)]
    assert findings[1].observed[0]["pid"] == 4242


def test_processes_are_not_judged_beside_running_jobs() -> None:
    findings = run("gpu.processes", make_snap([_busy(0)]), mode="agent")
    assert not bad(findings)


def _minors(gpus: list[Gpu], minors: list[int]) -> list[Gpu]:
    for gpu, minor in zip(gpus, minors, strict=True):
        gpu.minor_number = minor
    return gpus


def test_processes_only_on_the_jobs_gpus() -> None:
    snap = make_snap(_minors([make_gpu(0), make_gpu(1), _busy(2)], [0, 1, 2]))
    findings = run("gpu.processes", snap, mode="prolog", job_gpus="0,1")
    assert {f.component for f in findings} == {"gpu0", "gpu1"}
    assert not bad(findings)
    assert only(run("gpu.processes", snap, mode="prolog", job_gpus=[2]), Status.FAIL)
    unknown = run("gpu.processes", snap, mode="prolog", job_gpus=[7], job_id="5")
    assert [(f.status, f.action) for f in bad(unknown)] == [(Status.WARN, Action.FIX_CONFIG)]


def test_job_gpus_are_minor_numbers_or_uuids_never_nvml_indexes() -> None:
    """/dev/nvidia5 is NVML's GPU 2 here: SLURM_JOB_GPUS=5 is the busy one, 2 is not."""
    snap = make_snap(_minors([make_gpu(0), make_gpu(1), _busy(2)], [3, 4, 5]))
    assert only(run("gpu.processes", snap, mode="prolog", job_gpus="5", job_id="7"),
                Status.FAIL)
    assert not bad(run("gpu.processes", snap, mode="prolog", job_gpus="3,4", job_id="7"))
    by_uuid = run("gpu.processes", snap, mode="prolog", job_gpus=["GPU-00000002"], job_id="7")
    assert [f.component for f in bad(by_uuid)] == ["gpu2"]


def test_processes_are_judged_by_the_job_that_owns_them() -> None:
    other = GpuProcess(pid=1, slurm_job="99")
    own = GpuProcess(pid=2, slurm_job="7")
    nobody = GpuProcess(pid=3, slurm_job="")
    unreadable = GpuProcess(pid=4, slurm_job=None)
    gpus = _minors([make_gpu(0, processes=[other]), make_gpu(1, processes=[own]),
                    make_gpu(2, processes=[nobody, unreadable])], [0, 1, 2])
    snap = make_snap(gpus)

    def failing(mode: str, **params: Any) -> list[str]:
        return [f.component for f in bad(run("gpu.processes", snap, mode=mode, job_id="7",
                                             **params))]

    # Unknown GPUs (CPU-only job, NoDevFiles): never another job's (nor one whose cgroup
    # cannot be read); the job's own at its end, and nobody's.
    assert failing("prolog") == ["gpu2"]
    assert failing("epilog") == ["gpu1", "gpu2"]
    gpus[2].processes = [unreadable, GpuProcess(pid=5, name="nvidia-cuda-mps-server",
                                                slurm_job="")]
    assert failing("prolog") == []
    # The job holds GPUs 0 and 2 alone: anyone else's process there is a leftover.
    assert failing("prolog", job_gpus="0,2") == ["gpu0", "gpu2"]
    # gres/shard or gres/mps: other jobs' processes are expected there.
    assert failing("prolog", job_gpus="0,2", shared=True) == []
    assert failing("epilog", job_gpus="0,1", shared=True) == ["gpu1"]


def test_processes_no_permission_is_a_skip() -> None:
    gpu = make_gpu(0, processes=None, unsupported={"processes": "NoPermission"})
    findings = run("gpu.processes", make_snap([gpu]), mode="prolog")
    assert [f.status for f in findings] == [Status.SKIP]
    assert findings[0].observed == "NoPermission"
