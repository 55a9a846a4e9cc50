"""The prolog's inputs: the agent's report file, the job's environment, the epilog's poll."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdiag.agent.base.hostname import same_host
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.slurm import agent_report
from clusterdiag.agent.slurm.agent_report import load_fresh, utc_seconds
from clusterdiag.agent.slurm.epilog import poll_until_clean, xid_config
from clusterdiag.agent.slurm.job import JobEnv, seconds_since_process_start
from clusterdiag.agent.slurm.prolog import job_config
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.reports.model.node import NodeReport, iso


def write_report(state: Path, node: str = "n1", age_s: float = 1.0, duration_s: float = 0.5,
                 findings: list[Finding] | None = None, interval_s: float | None = 30) -> None:
    state.mkdir(parents=True, exist_ok=True)
    report = NodeReport(node=node, profile={"name": "dgx-h100"}, version="0.1.0",
                        started_at=iso(time.time() - age_s - duration_s),
                        duration_s=duration_s, level="quick", mode="agent",
                        findings=findings or [Finding.passed("node", "ok")])
    (state / "report.json").write_text(json.dumps(report.to_dict()))
    if interval_s is not None:
        (state / "agent.json").write_text(json.dumps(
            {"interval_s": interval_s, "pid": 1, "listen": "127.0.0.1:9464"}))


def _load(state: Path, node: str = "n1", max_age_s: float | None = None):  # type: ignore[no-untyped-def]
    return load_fresh(state, node, max_age_s=max_age_s, default_interval_s=30.0)


def test_a_report_younger_than_two_intervals_is_used(tmp_path: Path) -> None:
    write_report(tmp_path, age_s=50)
    cached = _load(tmp_path)
    assert cached.report is not None
    assert cached.report.node == "n1"
    assert 49 < (cached.age_s or 0) < 60  # read back at once: a loaded machine's seconds


def test_age_counts_from_the_end_of_the_collection_and_uses_the_agents_interval(
        tmp_path: Path) -> None:
    write_report(tmp_path, age_s=25, duration_s=100, interval_s=10)
    cached = _load(tmp_path)
    assert cached.report is None
    assert re.search(r"2[56] s old \(limit 20 s\)", cached.why)  # started_at is whole seconds


def test_max_report_age_overrides_the_interval(tmp_path: Path) -> None:
    write_report(tmp_path, age_s=50)
    assert _load(tmp_path, max_age_s=10).report is None
    write_report(tmp_path, age_s=50, interval_s=None)
    assert _load(tmp_path).report is not None  # default interval 30 s: limit 60 s


@pytest.mark.parametrize(("content", "why"), [
    (None, "no agent report"),
    ("{not json", "unreadable"),
    ("[" * 100_000, "unreadable: RecursionError"),  # json gives up, not a crash
    ('{"node": "n1"}', "malformed"),
    ('{"node": "n1", "profile": {}, "version": "x", "started_at": "yesterday", '
     '"duration_s": 1, "findings": []}', "malformed"),
])
def test_a_missing_or_broken_report_is_not_used(tmp_path: Path, content: str | None,
                                                why: str) -> None:
    if content is not None:
        (tmp_path / "report.json").write_text(content)
    cached = _load(tmp_path)
    assert cached.report is None
    assert why in cached.why


def test_another_nodes_report_is_not_used(tmp_path: Path) -> None:
    write_report(tmp_path, node="n2")
    assert "for node 'n2', not 'n1'" in _load(tmp_path).why
    write_report(tmp_path, node="n1.cluster.example")  # the agent knows its FQDN
    assert _load(tmp_path).report is not None
    assert _load(tmp_path, node="n1.cluster.example").report is not None


def test_a_z_suffixed_time_is_read(tmp_path: Path) -> None:
    write_report(tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    data["started_at"] = data["started_at"].replace("+00:00", "Z")
    (tmp_path / "report.json").write_text(json.dumps(data))
    assert _load(tmp_path).report is not None


@given(st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2400, 12, 31),
                    timezones=st.sampled_from([dt.timezone.utc,
                                               dt.timezone(dt.timedelta(hours=5, minutes=30)),
                                               dt.timezone(dt.timedelta(hours=-8))])))
def test_a_reports_time_reads_as_datetime_reads_it(when: dt.datetime) -> None:
    """The hand-written reader (the prolog's path does not import datetime) agrees with
    datetime on every time, leap days and offsets included, whole seconds or not."""
    assert utc_seconds(when.isoformat()) == pytest.approx(when.timestamp(), abs=1e-6)
    assert utc_seconds(when.astimezone(dt.timezone.utc).isoformat().replace(
        "+00:00", "Z")) == pytest.approx(when.timestamp(), abs=1e-6)


@given(st.integers(min_value=-2208988800, max_value=13569465600),  # 1900 to 2400
       st.integers(min_value=0, max_value=999_999))
def test_a_reports_time_is_written_as_datetime_writes_it(seconds: int, micros: int) -> None:
    """``iso`` (the prolog's path does not import datetime) writes what datetime's
    isoformat writes, a fraction of a second cut off, and ``utc_seconds`` reads it back."""
    written = iso(seconds + micros / 1e6)
    assert written == dt.datetime.fromtimestamp(seconds + micros / 1e6,
                                                dt.timezone.utc).isoformat(timespec="seconds")
    assert utc_seconds(written) == seconds


@pytest.mark.parametrize("stamp", [
    "2026-12-01T10:00:00",  # no offset: which zone would be a guess
    "2026-02-29T10:00:00+00:00", "2024-13-01T10:00:00Z", "2026-12-01T24:00:00Z",
    "2026-12-01 10:00:00Z", "2026-12-01T10:00:00+0000", "２０２６-12-01T10:00:00Z",
    "2026-12-01T10:00:00Z trailing", "",
])
def test_a_time_that_is_not_a_reports_is_refused(stamp: str) -> None:
    with pytest.raises(ValueError, match="time"):
        utc_seconds(stamp)


def test_job_environment() -> None:
    job = JobEnv.from_environ({"SLURM_JOBID": "12", "SLURM_JOB_USER": "alice",
                               "SLURMD_NODENAME": "n3", "CUDA_VISIBLE_DEVICES": "3,1",
                               "SLURM_JOB_START_TIME": str(int(time.time()) - 5)})
    assert (job.job_id, job.user, job.node, job.gpus) == ("12", "alice", "n3", ("3", "1"))
    assert job.start_time is not None
    assert job.start_time <= time.time()
    odd = JobEnv.from_environ({"CUDA_VISIBLE_DEVICES": "GPU-1234,MIG-5678",
                               "SLURM_JOB_START_TIME": "soon"})
    assert (odd.job_id, odd.gpus, odd.start_time) == (None, None, None)
    uuid = "GPU-5f1b4c1e-0000-4000-8000-000000000001"
    assert JobEnv.from_environ({"SLURM_JOB_GPUS": "NoDevFiles",
                                "CUDA_VISIBLE_DEVICES": uuid}).gpus == (uuid,)
    assert JobEnv.from_environ({"SLURM_SHARDS_ON_NODE": "2"}).shared
    # str.isdigit() accepts "²", which int() refuses: it must not crash the prolog
    assert JobEnv.from_environ({"SLURM_JOB_GPUS": "0,²"}).gpus is None


def test_one_same_host_rule_for_the_prolog_and_the_gather() -> None:
    from clusterdiag.reports.fleet import gather

    assert gather.same_host is agent_report.same_host is same_host
    assert same_host("n1", "n1.cluster.example")
    assert not same_host("n1", "n10")


def test_process_age_is_plausible() -> None:
    assert 0 < seconds_since_process_start() < 3600


def test_job_gpus_go_to_gpu_processes_unless_the_config_pins_them() -> None:
    job = JobEnv.from_environ({"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0,2"})
    config = job_config(Config(), job)
    assert config.data["checks"]["gpu.processes"] == {"job_id": "7", "job_gpus": ["0", "2"]}
    pinned = Config()
    pinned.data["checks"] = {"gpu.processes": {"job_gpus": [5], "shared": True}}
    assert job_config(pinned, job).data["checks"]["gpu.processes"] == {
        "job_gpus": [5], "shared": True, "job_id": "7"}
    assert job_config(Config(), JobEnv.from_environ({})).data["checks"] == {
        "gpu.processes": {}}


def test_xids_are_judged_since_the_job_start() -> None:
    config = xid_config(Config(), 1000.0, 1600.0)
    assert config.data["checks"]["gpu.xid"]["window_s"] == 600.0
    assert xid_config(Config(), None, 1600.0).data["checks"] == {}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


LEFT = [Finding.fail("gpu2", "compute processes left on the GPU")]
CLEAN = [Finding.passed("gpu2", "no compute process on the GPU")]


def test_processes_that_exit_within_the_grace_period_pass() -> None:
    clock = _Clock()
    answers = iter([LEFT, LEFT, CLEAN])
    findings, looks = poll_until_clean(LEFT, lambda: next(answers), 15.0, clock=clock,
                                       sleep=clock.sleep)
    assert findings == CLEAN
    assert looks == 4
    assert clock.now == 3.0


def test_processes_still_there_after_the_grace_period_fail() -> None:
    clock = _Clock()
    findings, looks = poll_until_clean(LEFT, lambda: LEFT, 2.5, clock=clock, sleep=clock.sleep)
    assert findings[0].status is Status.FAIL
    assert looks == 4
    assert clock.now == 2.5
    _, once = poll_until_clean(CLEAN, lambda: LEFT, 15.0, clock=clock, sleep=clock.sleep)
    assert once == 1
