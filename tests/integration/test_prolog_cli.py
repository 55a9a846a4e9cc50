"""``clusterdiag prolog|epilog|healthcheck`` as Slurm runs them: a subprocess with no PATH,
the job in the environment, and an ``scontrol`` that records what it was asked.

The stand-in scontrol answers ``show node`` from a file and appends every call to another,
so a test can say exactly which drains and resumes happened (the real Slurm is in
test_slurm.py)."""

from __future__ import annotations

import importlib
import json
import os
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterdiag.agent import cli
from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.health import lock, store
from clusterdiag.agent.health.lifecycle import Health, Incident
from clusterdiag.agent.run import session
from clusterdiag.checks.core.finding import Action, Finding, Status
from tests.conftest import REPO
from tests.unit.test_prolog_inputs import write_report

FAKE_SCONTROL = """#!/bin/sh
printf '%s|' "$@" >> "{dir}/calls"; echo >> "{dir}/calls"
if [ "$1" = show ] && [ "$2" = node ]; then cat "{dir}/node"; fi
if [ "$1" = show ] && [ "$2" = job ]; then cat "{dir}/job"; fi
exit 0
"""
SPEC = """nodes:
  - {names: "n[1-6]", profile: dgx-h100}
faults:
  - {node: n2, kind: nvlink_down, gpu: 3, link: 7}
  - {node: n3, kind: gpu_hang, gpu: 4}
  - {node: n4, kind: leftover_process, gpu: 2}
  - {node: n5, kind: xid, gpu: 1, code: 79, age_s: 5}
  - {node: n6, kind: xid, gpu: 1, code: 79, age_s: 3600}
"""


# The prolog budget of the tests that need the hung GPU failed: the default 8 s leaves the
# GPU readers under a second, which a loaded machine may spend before a reader reaches the
# hung call, and then the prolog rightly blames its own budget, not the GPU
# (agent/collectors/nvml_budget.py). 10 s leaves NVML seconds and still cannot hold a
# collection and two 2.4 s scontrol calls if only one call were kept back.
HUNG_GPU_BUDGET_S = 10.0
# Every other test's prolog budget: these tests are about verdicts, drains and messages, and
# on a loaded 2-core machine the default 8 s can leave the healthy GPUs' readers too little
# time (then, rightly, our own budget is blamed and the expected verdict never comes). The
# tests about the budget itself set theirs.
VERDICT_BUDGET_S = 20.0


class Slurm:
    """The stand-in scontrol's files."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "fake-slurm"
        self.dir.mkdir()
        self.program = self.dir / "scontrol"
        self.program.write_text(FAKE_SCONTROL.format(dir=self.dir))
        self.program.chmod(self.program.stat().st_mode | stat.S_IXUSR)
        self.node("n1", "IDLE")

    def node(self, name: str, state: str, reason: str | None = None) -> None:
        tail = f" Reason={reason} [root@2026-11-30T00:57:43]" if reason else ""
        (self.dir / "node").write_text(f"NodeName={name} Arch=x86_64 State={state} "
                                       f"Weight=1{tail}\n")

    def calls(self) -> list[list[str]]:
        path = self.dir / "calls"
        if not path.exists():
            return []
        return [line.rstrip("|").split("|") for line in path.read_text().splitlines()]

    def updates(self) -> list[list[str]]:
        return [c for c in self.calls() if c[0] == "update"]


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Slurm]:
    slurm = Slurm(tmp_path)
    (tmp_path / "spec.yaml").write_text(SPEC)
    write_config(tmp_path, slurm)
    return tmp_path, slurm


def write_config(root: Path, slurm: Slurm, **sections: dict[str, object]) -> Path:
    config = {"agent": {"state_dir": str(root / "state")},
              "prolog": {"scontrol": str(slurm.program), "budget_s": VERDICT_BUDGET_S},
              "epilog": {"grace_s": 1.5}}
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    path = root / "config.yaml"
    path.write_text(json.dumps(config))
    return path


def slurm_run(program: str, root: Path, node: str, *extra: str, job: bool = True,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """As slurmd runs it: no PATH, no HOME, the job's variables only."""
    environ = {"SLURMD_NODENAME": node, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    if job:
        environ.update({"SLURM_JOB_ID": "4711", "SLURM_JOB_USER": "alice",
                        "SLURM_SCRIPT_CONTEXT": f"{program}_slurmd"})
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "clusterdiag.agent", program, "--simulate",
         str(root / "spec.yaml"), "--config", str(root / "config.yaml"), *extra],
        capture_output=True, text=True, timeout=60, env=environ, check=False, cwd="/")


def _ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr


def test_healthy_node_passes_logs_job_and_user_and_never_calls_slurm(
        site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    proc = slurm_run("prolog", root, "n1")
    _ok(proc)
    assert proc.returncode == 0, proc.stderr
    assert "clusterdiag prolog: pass job=4711 user=alice node=n1" in proc.stderr
    assert proc.stdout == ""
    assert slurm.calls() == []  # SchedMD: no Slurm commands on the passing path


def test_a_fail_exits_1_prints_the_reason_and_drains(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    slurm.node("n2", "ALLOCATED")
    proc = slurm_run("prolog", root, "n2")
    _ok(proc)
    assert proc.returncode == 1
    reason = "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"
    assert f'reason="{reason}"' in proc.stderr
    assert slurm.updates() == [["update", "NodeName=n2", "State=DRAIN", f"Reason={reason}"]]


def test_an_operators_drain_reason_is_kept(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    slurm.node("n2", "MIXED+DRAIN", "op: bad fan [ticket 12]")
    proc = slurm_run("prolog", root, "n2")
    assert proc.returncode == 1
    assert slurm.updates() == []
    assert 'existing="op: bad fan [ticket 12]"' in proc.stderr


def test_our_own_older_reason_is_replaced(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    slurm.node("n2", "IDLE+DRAIN", "clusterdiag: gpu.xid gpu1 old")
    assert slurm_run("prolog", root, "n2").returncode == 1
    assert [u[3] for u in slurm.updates()] == [
        "Reason=clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"]


def test_drain_false_still_fails_but_leaves_slurm_alone(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    write_config(root, slurm, prolog={"drain": False})
    assert slurm_run("prolog", root, "n2").returncode == 1
    assert slurm.calls() == []


def test_a_missing_scontrol_is_loud_but_the_fail_stands(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    write_config(root, slurm, prolog={"scontrol": "/nonexistent/scontrol"})
    proc = slurm_run("prolog", root, "n2")
    assert proc.returncode == 1
    assert "ERROR could not drain the node" in proc.stderr
    assert "not found" in proc.stderr


@pytest.mark.parametrize("fail_closed", [False, True])
def test_own_errors_exit_0_unless_fail_closed(site: tuple[Path, Slurm], fail_closed: bool) -> None:
    root, slurm = site
    write_config(root, slurm, prolog={"fail_closed": fail_closed},
                 checks={"gpu.processes": {"job_gpus": "a,b"}})
    proc = slurm_run("prolog", root, "n1")
    _ok(proc)
    line = next(ln for ln in proc.stderr.splitlines() if "ERROR check could not run" in ln)
    assert "check=gpu.processes" in line
    assert "job=4711 user=alice" in line
    if fail_closed:
        assert proc.returncode == 1
        assert slurm.updates()[0][3].startswith("Reason=clusterdiag: error ")
    else:
        assert proc.returncode == 0
        assert slurm.calls() == []
        assert "exiting 0 (fail_closed is false)" in proc.stderr


def test_fail_closed_with_drain_false_fails_but_leaves_slurm_alone(
        site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    write_config(root, slurm, prolog={"fail_closed": True, "drain": False},
                 checks={"gpu.processes": {"job_gpus": "a,b"}})
    proc = slurm_run("prolog", root, "n1")
    _ok(proc)
    assert proc.returncode == 1
    assert slurm.updates() == []


@pytest.mark.parametrize("bad", ["prolog: [", "prolog: {drian: true}"])
def test_a_broken_config_exits_0_in_one_loud_line(site: tuple[Path, Slurm], bad: str) -> None:
    root, _slurm = site
    (root / "config.yaml").write_text(bad)
    proc = slurm_run("prolog", root, "n2")
    _ok(proc)
    assert proc.returncode == 0
    errors = [ln for ln in proc.stderr.splitlines() if "ERROR" in ln]
    assert len(errors) == 1
    assert "config" in errors[0]



@pytest.mark.parametrize("program", ["prolog", "epilog", "healthcheck"])
def test_a_wrapper_with_a_bad_flag_exits_0_and_says_so(site: tuple[Path, Slurm],
                                                       program: str) -> None:
    """Slurm drains on any non-zero exit; a typo in a wrapper must not drain the fleet."""
    root, slurm = site
    proc = slurm_run(program, root, "n2", "--levle", "quick")
    _ok(proc)
    assert proc.returncode == 0
    assert "No such option '--levle'" in proc.stderr
    assert "exiting 0 so Slurm does not drain the node" in proc.stderr
    assert slurm.calls() == []

def test_a_fresh_agent_report_is_used_instead_of_collecting(site: tuple[Path, Slurm]) -> None:
    root, _slurm = site
    fail = Finding(Status.FAIL, "gpu5", "GPU too hot", "91 C", None, Action.INVESTIGATE,
                   "gpu.temperature")
    write_report(root / "state", node="n1", age_s=2, findings=[fail])
    proc = slurm_run("prolog", root, "n1")
    assert proc.returncode == 1
    assert 'source="agent report' in proc.stderr
    assert 'reason="clusterdiag: gpu.temperature gpu5 91 C"' in proc.stderr


def test_a_stale_agent_report_is_ignored(site: tuple[Path, Slurm]) -> None:
    root, _ = site
    write_report(root / "state", node="n1", age_s=600, findings=[
        Finding(Status.FAIL, "gpu5", "hot", "91 C", None, Action.INVESTIGATE,
                "gpu.temperature")])
    proc = slurm_run("prolog", root, "n1")
    assert proc.returncode == 0, proc.stderr
    assert "running the quick checks" in proc.stderr
    assert "s old (limit 60 s)" in proc.stderr


@pytest.mark.slow
def test_a_hung_gpu_and_a_hung_scontrol_fit_the_budget_and_hold_no_pipe(
        site: tuple[Path, Slurm]) -> None:
    """The worst case: NVML hangs, then scontrol (a wrapper with a child) never answers.
    Slurm reads the prolog's output until EOF, so a child left holding our stdout or
    stderr would stall slurmd after we exit."""
    root, slurm = site
    hung = slurm.dir / "hung-scontrol"
    hung.write_text("#!/bin/sh\nsleep 60 &\nwait\n")
    hung.chmod(0o755)
    write_config(root, slurm, prolog={"scontrol": str(hung), "budget_s": HUNG_GPU_BUDGET_S})
    environ = {"SLURMD_NODENAME": "n3", "SLURM_JOB_ID": "1", "SLURM_JOB_USER": "bob"}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterdiag.agent", "prolog", "--simulate",
         str(root / "spec.yaml"), "--config", str(root / "config.yaml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ, cwd="/")
    assert proc.stdout is not None
    assert proc.stderr is not None
    code = proc.wait(timeout=30)
    exited = time.monotonic() - started
    open_pipes = [proc.stdout, proc.stderr]
    stderr = b""
    deadline = time.monotonic() + 20.0  # a child holding them would hold them 60 s
    while open_pipes and time.monotonic() < deadline:
        ready, _, _ = select.select(open_pipes, [], [], max(0.0, deadline - time.monotonic()))
        for pipe in ready:
            chunk = os.read(pipe.fileno(), 65536)
            stderr += chunk if pipe is proc.stderr else b""
            if not chunk:
                open_pipes.remove(pipe)
    still_open = len(open_pipes)
    proc.stdout.close()
    proc.stderr.close()
    assert still_open == 0, "a child of the prolog still holds its stdout/stderr"
    assert code == 1
    assert exited < HUNG_GPU_BUDGET_S, f"prolog took {exited:.1f} s, over its budget"
    text = stderr.decode()
    assert 'reason="clusterdiag: gpu.responsive gpu4' in text
    assert "ERROR could not drain the node" in text
    assert "no answer within" in text


def test_epilog_fails_on_processes_left_after_the_grace_period(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    slurm.node("n4", "COMPLETING")
    started = time.monotonic()
    proc = slurm_run("epilog", root, "n4")
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - started >= 1.5  # it waited the grace period
    assert "process_looks=" in proc.stderr
    assert "process_looks=1 " not in proc.stderr
    assert slurm.updates()[0][3] == ("Reason=clusterdiag: epilog gpu.processes gpu2 compute "
                                     "processes left on the GPU")


def test_epilog_only_looks_at_the_jobs_gpus(site: tuple[Path, Slurm]) -> None:
    root, _slurm = site
    proc = slurm_run("epilog", root, "n4", env={"SLURM_JOB_GPUS": "0,1"})
    assert proc.returncode == 0, proc.stderr
    assert "process_looks=1" in proc.stderr


@pytest.mark.parametrize(("node", "code"), [("n5", 1), ("n6", 0)])
def test_epilog_judges_xids_logged_since_the_job_started(site: tuple[Path, Slurm], node: str,
                                                         code: int) -> None:
    root, slurm = site
    slurm.node(node, "COMPLETING")
    start = str(int(time.time()) - 60)
    proc = slurm_run("epilog", root, node, env={"SLURM_JOB_START_TIME": start})
    assert proc.returncode == code, proc.stderr
    if code:
        assert "clusterdiag: epilog gpu.xid gpu1 Xid 79" in slurm.updates()[0][3]


def test_epilog_asks_scontrol_for_the_job_start(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3000))
    (slurm.dir / "job").write_text(f"JobId=4711 JobState=COMPLETING StartTime={start} "
                                   "EndTime=x\n")
    proc = slurm_run("epilog", root, "n6")  # its Xid is an hour old: an earlier job's
    assert proc.returncode == 0, proc.stderr
    assert ["show", "job", "4711", "-o"] in slurm.calls()


def _validation_ends(root: Path) -> None:
    """Wait for the validation the health check started: it holds the lock it inherited
    from the moment it starts until it ends."""
    deadline = time.monotonic() + 120
    while lock.running(root / "state"):
        assert time.monotonic() < deadline, (root / "state" / "validate.log").read_text()
        time.sleep(0.1)


def test_healthcheck_drains_a_failing_node_and_resumes_it_once_its_validation_passes(
        site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    (root / "state").mkdir()  # the agent's, where the lifecycle and the lock live
    slurm.node("n2", "IDLE")
    assert slurm_run("healthcheck", root, "n2", job=False).returncode == 1
    reason = "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"
    assert slurm.updates() == [["update", "NodeName=n2", "State=DRAIN", f"Reason={reason}"]]
    slurm.node("n1", "IDLE+DRAIN", reason)  # the fault is gone: node n1 is healthy
    proc = slurm_run("healthcheck", root, "n1", job=False)
    assert proc.returncode == 0, proc.stderr
    assert "validation started" in proc.stderr
    assert len(slurm.updates()) == 1  # not resumed on a clean pass alone
    _validation_ends(root)
    assert "passed: nvlink.links_up gpu3 (qualify): allreduce, d2d passed" in (
        root / "state" / "validate.log").read_text()
    proc = slurm_run("healthcheck", root, "n1", job=False)
    assert slurm.updates()[-1] == ["update", "NodeName=n1", "State=RESUME"], proc.stderr


def _prolog_holding_the_lock(root: Path, node: str) -> subprocess.CompletedProcess[str]:
    """The prolog on ``node`` while the validation lock in the state directory is held."""
    fd = lock.take(root / "state")
    assert fd is not None
    try:
        return slurm_run("prolog", root, node)
    finally:
        os.close(fd)


def test_a_job_on_a_node_under_validation_is_refused_for_its_incident(
        site: tuple[Path, Slurm]) -> None:
    """An operator resumed the node half-way through its validation: the prolog refuses
    the job and drains the node for the incident, the validation decides."""
    root, slurm = site
    (root / "state").mkdir()
    health = Health()
    health.drain(Incident("fabric.manager", "fabric.manager", "node", "failed", time.time()))
    store.save(root / "state", health)
    proc = _prolog_holding_the_lock(root, "n1")
    assert proc.returncode == 1, proc.stderr
    assert slurm.updates() == [["update", "NodeName=n1", "State=DRAIN",
                                "Reason=clusterdiag: fabric.manager node a validation is "
                                "running"]]


def test_a_lock_held_with_no_incident_open_never_stands_in_for_the_checks(
        site: tuple[Path, Slurm]) -> None:
    """The validation lock held while nothing is under validation (a health check
    deciding; anyone who can write the state directory): the prolog judges the node as on
    any job, and n2's NVLink fault still fails it."""
    root, slurm = site
    slurm.node("n2", "ALLOCATED")
    (root / "state").mkdir()
    proc = _prolog_holding_the_lock(root, "n2")
    assert proc.returncode == 1, proc.stderr
    assert slurm.updates() == [["update", "NodeName=n2", "State=DRAIN",
                                "Reason=clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"]]


@pytest.mark.parametrize("reason", ["op: bad fan [ticket 12]", "Prolog error"])
def test_healthcheck_never_resumes_a_drain_that_is_not_ours(site: tuple[Path, Slurm],
                                                            reason: str) -> None:
    root, slurm = site
    slurm.node("n1", "IDLE+DRAIN", reason)
    proc = slurm_run("healthcheck", root, "n1", job=False)
    assert proc.returncode == 0
    assert slurm.updates() == []
    assert "not resuming" in proc.stderr


def test_healthcheck_leaves_a_healthy_undrained_node_alone(site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    assert slurm_run("healthcheck", root, "n1", job=False).returncode == 0
    assert slurm.updates() == []


LEAN_FORBIDDEN = ("aiohttp", "prometheus_client", "rich", "jsonschema", "ClusterShell")


@pytest.mark.parametrize("fresh", [True, False])
def test_the_prolog_path_imports_nothing_heavy(tmp_path: Path, fresh: bool) -> None:
    """Measured with ``python -X importtime`` on the real (not simulated) path: the
    simulator itself reads node sets with ClusterShell."""
    (tmp_path / "root").mkdir()
    config = {"agent": {"state_dir": str(tmp_path / "state")}, "prolog": {"drain": False}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    if fresh:
        write_report(tmp_path / "state", node="n1")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "clusterdiag.agent", "prolog",
         "--root", str(tmp_path / "root"), "--config", str(tmp_path / "config.yaml")],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
        env={**os.environ, "SLURMD_NODENAME": "n1"})
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "clusterdiag.agent.slurm.prolog" in imported, proc.stderr[-2000:]
    heavy = sorted(m for m in imported if m.split(".")[0] in LEAN_FORBIDDEN)
    assert heavy == []


def test_leftover_processes_fail_the_prolog_even_with_a_fresh_agent_report(
        site: tuple[Path, Slurm]) -> None:
    """The agent only notes processes (they may be a running job's): the prolog judges
    gpu.processes itself, for the job's GPUs."""
    root, slurm = site
    slurm.node("n4", "ALLOCATED")
    write_report(root / "state", node="n4", age_s=2)
    proc = slurm_run("prolog", root, "n4")
    assert proc.returncode == 1, proc.stderr
    assert 'source="agent report' in proc.stderr
    assert "reran=gpu.processes" in proc.stderr
    assert slurm.updates()[0][3] == ("Reason=clusterdiag: gpu.processes gpu2 compute "
                                     "processes left on the GPU")
    other_gpus = slurm_run("prolog", root, "n4", env={"SLURM_JOB_GPUS": "0,1"})
    assert other_gpus.returncode == 0, other_gpus.stderr
    assert 'source="agent report' in other_gpus.stderr


@pytest.mark.slow
def test_a_hung_gpu_leaves_time_for_both_scontrol_calls_of_a_slow_slurmctld(
        site: tuple[Path, Slurm]) -> None:
    """Draining is ``show`` then ``update``; with each taking most of scontrol's 3 s
    timeout, a budget that kept back one call lost the update to "no time left"."""
    root, slurm = site
    slow = slurm.dir / "slow-scontrol"
    slow.write_text(f"#!/bin/sh\nsleep 2.4\nexec {slurm.program} \"$@\"\n")
    slow.chmod(0o755)
    write_config(root, slurm, prolog={"scontrol": str(slow), "budget_s": HUNG_GPU_BUDGET_S})
    slurm.node("n3", "ALLOCATED")
    started = time.monotonic()
    proc = slurm_run("prolog", root, "n3")
    took = time.monotonic() - started
    _ok(proc)
    assert proc.returncode == 1
    assert "ERROR could not drain" not in proc.stderr
    assert 'clusterdiag prolog: drained job=4711 user=alice node=n3 reason="clusterdiag: ' \
           'gpu.responsive gpu4' in proc.stderr
    assert [u[:3] for u in slurm.updates()] == [["update", "NodeName=n3", "State=DRAIN"]]
    assert took < HUNG_GPU_BUDGET_S, f"prolog took {took:.1f} s, over its budget"


@pytest.mark.parametrize("reason", [
    "clusterdiag: ib.error_rate mlx5_0/1 symbol errors 12/s",  # a rate check
    "clusterdiag: epilog gpu.xid gpu1 Xid 79",  # seen during a job
    "clusterdiag: qualify gpu_compute gpu2 43004 GFLOPS",  # an active test
])
def test_healthcheck_validates_a_drain_of_ours_and_never_resumes_it_on_a_pass_alone(
        site: tuple[Path, Slurm], reason: str) -> None:
    root, slurm = site
    (root / "state").mkdir()
    slurm.node("n1", "IDLE+DRAIN", reason)
    proc = slurm_run("healthcheck", root, "n1", job=False)
    _ok(proc)
    assert proc.returncode == 0
    assert "validation started" in proc.stderr
    assert slurm.updates() == []
    _validation_ends(root)


def test_healthcheck_resumes_after_our_own_error_once_it_can_check_again(
        site: tuple[Path, Slurm]) -> None:
    root, slurm = site
    slurm.node("n1", "IDLE+DRAIN", "clusterdiag: error config unreadable")
    assert slurm_run("healthcheck", root, "n1", job=False).returncode == 0
    assert slurm.updates() == [["update", "NodeName=n1", "State=RESUME"]]


@pytest.mark.parametrize(("reason", "kept"), [
    ("clusterdiag: epilog gpu.xid gpu1 Xid 79", "kept the epilog's drain reason"),
    ("clusterdiag: qualify rails mlx5_4/1 321.9 Gb/s", "kept the qualify's drain reason"),
])
def test_a_later_fail_keeps_a_reason_only_a_person_lifts(
        site: tuple[Path, Slurm], reason: str, kept: str) -> None:
    """Replaced, the epilog's or qualify's reason would be lost, and the node resumed once
    the newer problem passes."""
    root, slurm = site
    slurm.node("n2", "IDLE+DRAIN", reason)
    proc = slurm_run("healthcheck", root, "n2", job=False)
    assert proc.returncode == 1
    assert slurm.updates() == []
    assert kept in proc.stderr


@pytest.mark.parametrize("program", ["prolog", "epilog", "healthcheck"])
@pytest.mark.parametrize(("error", "shown"), [
    (RuntimeError("boom\nat line 2"), "crashed: RuntimeError: boom at line 2"),
    (UsageError("spec: no such file"), "spec: no such file"),  # would exit 2
])
def test_a_crash_outside_the_entry_points_guard_exits_0_in_one_loud_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], program: str,
        error: Exception, shown: str) -> None:
    """What execute() cannot catch (its own setup, a helper of act()) reaches main()."""
    def crash(_inputs: object) -> int:
        raise error

    monkeypatch.setattr(importlib.import_module(f"clusterdiag.agent.slurm.{program}"),
                        "main", crash)
    monkeypatch.setattr(sys, "argv", ["clusterdiag", program, "--simulate", "dgx-h100"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 0
    assert capsys.readouterr().err.splitlines() == [
        f"clusterdiag: {program}: ERROR {shown}; exiting 0 so Slurm does not drain the node "
        "for it (fail_closed cannot be read here)"]


def test_other_commands_still_show_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(session, "run_options", crash)
    monkeypatch.setattr(sys, "argv", ["clusterdiag", "run", "--simulate", "dgx-h100"])
    with pytest.raises(RuntimeError, match="boom"):
        cli.main()


def wrapper_run(program: str, root: Path, node: str, env: dict[str, str]
                ) -> subprocess.CompletedProcess[str]:
    """The shipped wrapper as slurmd runs it: no PATH, the job's variables."""
    environ = {"SLURMD_NODENAME": node, "SLURM_JOB_ID": "4711", "SLURM_JOB_USER": "alice",
               "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run(
        [str(REPO / f"systemd/clusterdiag-{program}.sh"), "--simulate",
         str(root / "spec.yaml"), "--config", str(root / "config.yaml")],
        capture_output=True, text=True, timeout=60, env=environ, check=False, cwd="/")


def _program(root: Path, text: str) -> Path:
    path = root / "clusterdiag"
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("program", ["prolog", "epilog", "healthcheck"])
@pytest.mark.parametrize("broken", [
    None,  # not installed: the shell would exit 127
    "#!/nonexistent/venv/bin/python\n",  # its interpreter is gone: 127 from exec
    "#!/bin/sh\nexit 2\n",  # an exit that is no verdict
])
def test_a_wrapper_whose_program_is_missing_or_broken_exits_0_and_says_so(
        site: tuple[Path, Slurm], program: str, broken: str | None) -> None:
    root, slurm = site
    log = root / "wrapper.log"
    binary = root / "clusterdiag" if broken is None else _program(root, broken)
    proc = wrapper_run(program, root, "n2", {"CLUSTERDIAG": str(binary),
                                              "CLUSTERDIAG_LOG": str(log)})
    assert proc.returncode == 0, proc.stderr
    line = f"clusterdiag {program}: ERROR {binary}"
    assert line in proc.stderr
    assert "exiting 0 so Slurm does not drain the node" in proc.stderr
    assert line in log.read_text()
    assert slurm.calls() == []


def test_the_wrappers_are_one_script_and_a_misnamed_copy_exits_0(tmp_path: Path) -> None:
    """One script under three names: the name picks the entry point, and a copy under
    any other name must not fail (and so drain) whatever Slurm hook runs it."""
    shipped = {p: (REPO / f"systemd/clusterdiag-{p}.sh").resolve()
               for p in ("prolog", "epilog", "healthcheck")}
    assert set(shipped.values()) == {(REPO / "systemd/clusterdiag-slurm.sh").resolve()}
    odd = tmp_path / "prolog-wrapper.sh"
    odd.write_text(shipped["prolog"].read_text())
    odd.chmod(0o755)
    proc = subprocess.run([str(odd)], capture_output=True, text=True, timeout=30, env={},
                          check=False)
    assert proc.returncode == 0
    assert "installed as prolog-wrapper.sh" in proc.stderr


@pytest.mark.parametrize(("program", "node", "reason"), [
    ("prolog", "n2", "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"),
    ("healthcheck", "n2", "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"),
    ("epilog", "n4", "clusterdiag: epilog gpu.processes gpu2 compute processes left on the GPU"),
])
def test_a_wrapper_whose_log_cannot_be_opened_logs_to_stderr_and_keeps_the_verdict(
        site: tuple[Path, Slurm], program: str, node: str, reason: str) -> None:
    root, slurm = site
    slurm.node(node, "IDLE")
    (root / "not-a-dir").write_text("")
    binary = _program(root, f'#!/bin/sh\nexec {sys.executable} -m clusterdiag.agent "$@"\n')
    proc = wrapper_run(program, root, node, {
        "CLUSTERDIAG": str(binary), "CLUSTERDIAG_LOG": str(root / "not-a-dir/x.log")})
    assert proc.returncode == 1, proc.stderr  # a real fail still fails
    assert "cannot write" in proc.stderr
    assert f"clusterdiag {program}: FAIL node not ready" in proc.stderr
    assert [u[3] for u in slurm.updates()] == [f"Reason={reason}"]


def _prolog_started_seconds_ago(root: Path, node: str, seconds: float
                                ) -> subprocess.CompletedProcess[str]:
    """The prolog as slurmd runs it, but its process started ``seconds`` before the
    prolog's code does (a shell that sleeps, then execs it: the same process, so the
    same start time): its budget counts from Slurm's start, as on a node where slurmd
    itself was slow to start it."""
    environ = {"SLURMD_NODENAME": node, "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
               "SLURM_JOB_ID": "4711", "SLURM_JOB_USER": "alice"}
    return subprocess.run(
        ["/bin/sh", "-c", f'sleep {seconds}; exec "$0" "$@"', sys.executable, "-m",
         "clusterdiag.agent", "prolog", "--simulate", str(root / "spec.yaml"), "--config",
         str(root / "config.yaml")],
        capture_output=True, text=True, timeout=90, env=environ, check=False, cwd="/")


def test_a_spent_budget_is_our_error_never_a_gpu_timeout(site: tuple[Path, Slurm]) -> None:
    """Started 6 s into its 8 s budget, the prolog keeps 6 s for scontrol, so NVML gets
    the 0.5 s floor and no reader sleeps in a call long enough to call a GPU hung: even
    the hung gpu4 is not judged. Each unanswered GPU is an error naming our budget, the
    prolog exits 0 loudly and Slurm is never asked to drain."""
    root, slurm = site
    write_config(root, slurm, prolog={"budget_s": 8.0})  # the default
    slurm.node("n3", "ALLOCATED")
    proc = _prolog_started_seconds_ago(root, "n3", 6)
    _ok(proc)
    assert proc.returncode == 0, proc.stderr
    assert slurm.updates() == []
    assert 'reason="clusterdiag: gpu.responsive' not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines()
              if "ERROR check could not run" in ln and "check=gpu.responsive" in ln]
    assert errors, proc.stderr
    assert all("budget" in ln for ln in errors), errors
    assert "exiting 0 (fail_closed is false)" in proc.stderr


def test_a_hung_gpu_with_time_to_answer_still_fails_and_drains(site: tuple[Path, Slurm]
                                                               ) -> None:
    """The other side: with a budget that leaves NVML its 6 s, the hung gpu4's reader
    sleeps in the call for seconds; that is the GPU (a fail and a drain naming gpu4),
    and the seven GPUs that answered pass."""
    root, slurm = site
    write_config(root, slurm, prolog={"budget_s": 20})
    slurm.node("n3", "ALLOCATED")
    proc = slurm_run("prolog", root, "n3")
    _ok(proc)
    assert proc.returncode == 1, proc.stderr
    assert 'reason="clusterdiag: gpu.responsive gpu4' in proc.stderr
    assert [u[:3] for u in slurm.updates()] == [["update", "NodeName=n3", "State=DRAIN"]]
    assert "budget" not in proc.stderr
