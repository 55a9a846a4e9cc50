"""``clusterdiag epilog``: did the job that just ended leave the node unfit for the next?

Two things, judged by the same checks ``run`` uses: compute processes still on the job's
GPUs once a grace period has passed (a process takes a moment to exit after its job
step is killed, so the epilog polls instead of judging the first look), and Xids that
need action logged since the job started (the job's start from SLURM_JOB_START_TIME, or
from ``scontrol show job``; older Xids belong to an earlier job and are not its fault).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...checks.core.finding import Finding, Status
from ...reports.model.node import iso
from ..run.runner import run_node
from ..settings.config import Config
from .entry import Inputs, Outcome, Run, execute
from .prolog import job_config, options
from .scontrol import SlurmError

POLL_S = 1.0
PROCESSES = "gpu.processes"
# A GPU that stopped answering during the job is judged too: gpu.processes and gpu.xid
# defer to gpu.responsive for it, and the next job would land on it.
CHECKS = ("gpu.responsive", "gpu.xid", PROCESSES)


def main(inputs: Inputs) -> int:
    return execute("epilog", inputs, check_job_end)


def poll_until_clean(first: list[Finding], look: Callable[[], list[Finding]], grace_s: float,
                     *, poll_s: float = POLL_S, clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> tuple[list[Finding], int]:
    """Look again until nothing fails or ``grace_s`` has passed since the first look;
    the last look's findings and how many looks it took."""
    until = clock() + grace_s
    looks = 1
    findings = first
    while any(f.status is Status.FAIL for f in findings):
        left = until - clock()
        if left <= 0:
            break
        sleep(min(poll_s, left))
        findings = look()
        looks += 1
    return findings, looks


def xid_config(config: Config, job_start: float | None, now: float) -> Config:
    """Judge only the Xids logged since the job started."""
    if job_start is None:
        return config
    data = dict(config.data)
    own = dict(data["checks"].get("gpu.xid") or {})
    own["window_s"] = max(1.0, now - job_start)
    data["checks"] = {**data["checks"], "gpu.xid": own}
    return Config(data, config.path)


def job_start(run: Run) -> float | None:
    if run.job.start_time is not None:
        return run.job.start_time
    if run.job.job_id is None:
        return None
    try:
        return run.scontrol().job_start(run.job.job_id)
    except SlurmError as exc:
        run.log("job start unknown", error=exc)
        return None


def check_job_end(run: Run) -> Outcome:
    """One collection judges all three; only leftover processes are looked at again."""
    run.config = job_config(run.config, run.job)
    start = job_start(run)
    if start is None:
        run.log("job start unknown: Xids judged over gpu.xid's own window")
    run.config = xid_config(run.config, start, time.time())
    extra: dict[str, Any] = {"job_start": _stamp(start)}
    first = run_node(run.env, run.config, options(run, CHECKS)).findings
    if any(f.status is Status.FAIL and f.check != PROCESSES for f in first):
        return Outcome(first, "own checks", extra)
    grace = min(float(run.settings["grace_s"]), max(0.0, run.collect_budget() - 1.0))

    def look() -> list[Finding]:
        return run_node(run.env, run.config, options(run, (PROCESSES,))).findings

    procs, extra["process_looks"] = poll_until_clean(
        [f for f in first if f.check == PROCESSES], look, grace)
    return Outcome([*(f for f in first if f.check != PROCESSES), *procs], "own checks", extra)


def _stamp(epoch: float | None) -> str | None:
    if epoch is None:
        return None

    return iso(epoch)
