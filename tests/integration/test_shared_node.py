"""The prolog and epilog on a shared node judge only the job's own GPUs and processes,
as slurmd runs them: the job's GPUs from SLURM_JOB_GPUS or
CUDA_VISIBLE_DEVICES (physical minor numbers, or GPU- UUIDs; NoDevFiles or nothing means
unknown), each GPU process attributed to a job by its /proc/<pid>/cgroup.

Job 4711 is the one starting or ending; job 99 is another job already on the node.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.test_prolog_cli import Slurm, slurm_run, write_config

OTHER_JOB_ON_GPU3 = "  - {node: n1, kind: leftover_process, gpu: 3, job: 99, pid: 5003}\n"
OWN_LEFTOVER_ON_GPU1 = "  - {node: n1, kind: leftover_process, gpu: 1, job: 4711, pid: 5001}\n"
NO_JOB_ON_GPU0 = "  - {node: n1, kind: leftover_process, gpu: 0, pid: 5000}\n"


def _site(tmp_path: Path, *faults: str) -> Slurm:
    tmp_path.mkdir(exist_ok=True)
    slurm = Slurm(tmp_path)
    (tmp_path / "spec.yaml").write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                                        + ("faults:\n" + "".join(faults) if faults else ""))
    write_config(tmp_path, slurm, prolog={"budget_s": 20}, epilog={"budget_s": 20})
    return slurm


def _uuid(tmp_path: Path, index: int) -> str:
    proc = run_cli("run", "--simulate", str(tmp_path / "spec.yaml"), "--format", "json",
                   "--checks", "gpu.count")
    gpus = json.loads(proc.stdout)["inventory"]["gpus"]
    uuid: str = next(g["uuid"] for g in gpus if g["index"] == index)
    return uuid


@pytest.mark.parametrize("env", [
    pytest.param({}, id="cpu-only"),  # no GPU list at all
    pytest.param({"SLURM_JOB_GPUS": "NoDevFiles"}, id="nodevfiles"),
    pytest.param({"SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"}, id="other-gpus"),
    pytest.param({"SLURM_JOB_GPUS": "3", "SLURM_SHARDS_ON_NODE": "2"}, id="shard"),
    pytest.param({"CUDA_VISIBLE_DEVICES": "3", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"},
                 id="mps"),
])
def test_prolog_leaves_another_jobs_processes_alone(tmp_path: Path,
                                                    env: dict[str, str]) -> None:
    slurm = _site(tmp_path, OTHER_JOB_ON_GPU3)
    proc = slurm_run("prolog", tmp_path, "n1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "clusterdiag prolog: pass" in proc.stderr
    assert slurm.updates() == []


def test_prolog_judges_the_jobs_gpus_named_by_uuid(tmp_path: Path) -> None:
    slurm = _site(tmp_path, OTHER_JOB_ON_GPU3, NO_JOB_ON_GPU0)
    own, other = _uuid(tmp_path, 0), _uuid(tmp_path, 3)
    proc = slurm_run("prolog", tmp_path, "n1", env={"CUDA_VISIBLE_DEVICES": own})
    assert proc.returncode == 1, proc.stderr
    assert "gpu.processes gpu0" in proc.stderr
    assert [u[2] for u in slurm.updates()] == ["State=DRAIN"]
    # Slurm gave GPU 3 to this job alone (no shard, no MPS): job 99's process on it is a
    # leftover of a job that is over, and the GPU is not free.
    slurm = _site(tmp_path / "again", OTHER_JOB_ON_GPU3)
    proc = slurm_run("prolog", tmp_path / "again", "n1", env={"CUDA_VISIBLE_DEVICES": other})
    assert proc.returncode == 1, proc.stderr
    assert "gpu.processes gpu3" in proc.stderr


def test_prolog_still_fails_a_leftover_on_the_jobs_exclusive_gpu(tmp_path: Path) -> None:
    slurm = _site(tmp_path, NO_JOB_ON_GPU0)
    proc = slurm_run("prolog", tmp_path, "n1", env={"SLURM_JOB_GPUS": "0"})
    assert proc.returncode == 1, proc.stderr
    assert "gpu.processes gpu0" in proc.stderr
    assert len(slurm.updates()) == 1


@pytest.mark.parametrize("env", [pytest.param({}, id="unknown"),
                                 pytest.param({"SLURM_JOB_GPUS": "1"}, id="listed")])
def test_epilog_fails_the_jobs_own_leftover_and_no_one_elses(tmp_path: Path,
                                                             env: dict[str, str]) -> None:
    slurm = _site(tmp_path, OTHER_JOB_ON_GPU3, OWN_LEFTOVER_ON_GPU1)
    proc = slurm_run("epilog", tmp_path, "n1", env={"SLURM_JOB_START_TIME": "1", **env})
    assert proc.returncode == 1, proc.stderr
    assert "gpu.processes gpu1" in proc.stderr
    assert "gpu3" not in proc.stderr.split("reason=", 1)[-1]
    assert len(slurm.updates()) == 1
    slurm = _site(tmp_path / "again", OTHER_JOB_ON_GPU3)
    proc = slurm_run("epilog", tmp_path / "again", "n1",
                     env={"SLURM_JOB_START_TIME": "1", **env})
    assert proc.returncode == 0, proc.stderr
    assert slurm.updates() == []
