"""What the prolog, epilog and health check share: setup, the budget, and the exit policy.

Slurm drains a node on any non-zero prolog or epilog exit, so the exit code carries one
meaning only: the node failed a check. clusterdiag's own trouble (a bad config, a check
that could not run, a crash) exits 0 with a loud line on stderr, unless ``fail_closed``
says a node we cannot vouch for must not take jobs. On a fail the node is drained with a
reason of our own (``clusterdiag: ...``), never over one an operator or Slurm set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...checks.finding import Finding, Status
from ..config import Config
from ..errors import ClusterdiagError
from ..sources import SourceEnv
from .job import JobEnv, seconds_since_process_start
from .log import Log
from .reason import EPILOG, OWN_ERROR, PREFIX, clip, drain_reason, owned, parse
from .scontrol import DEFAULT_TIMEOUT_S, Scontrol, SlurmError

EXIT_OK, EXIT_FAIL = 0, 1
SCONTROL_CALLS = 2  # drain() and resume_if_ours(): show node, then update


@dataclass
class Inputs:
    """The command line, as the source flags give it (DESIGN §3)."""

    config_path: Path | None = None
    root: Path | None = None
    kernel_log: Path | None = None
    simulate: str | None = None
    node: str | None = None
    profile: str | None = None
    level: str | None = None


@dataclass
class Outcome:
    """What a program concluded: its findings and where they came from."""

    findings: list[Finding]
    source: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    program: str
    config: Config
    env: SourceEnv
    job: JobEnv
    log: Log
    deadline: float  # monotonic; the whole program, scontrol included
    inputs: Inputs

    @property
    def settings(self) -> dict[str, Any]:
        return self.config.section(self.program)

    def scontrol(self) -> Scontrol:
        return Scontrol(self.config.section("prolog").get("scontrol"),
                        timeout_s=DEFAULT_TIMEOUT_S, deadline=self.deadline - 0.1)

    def collect_budget(self) -> float:
        """What is left for collecting once scontrol's timeouts are set aside: a drain or
        a resume is two calls (``show`` to protect an operator's reason, then ``update``),
        and an update cut short leaves Slurm to drain with its generic "Prolog error"."""
        return max(0.5, self.deadline - time.monotonic() - SCONTROL_CALLS * DEFAULT_TIMEOUT_S)


Body = Callable[[Run], Outcome]
Act = Callable[[Run, Outcome, float], int]


def execute(program: str, inputs: Inputs, body: Body, act: Act | None = None) -> int:
    """Set up, run ``body``, then act on what it found (``decide`` unless given);
    returns the exit code."""
    job = JobEnv.from_environ()
    log = Log(program, job=job.job_id, user=job.user, node=inputs.node or job.node)
    log("start")
    try:
        config, env = _setup(inputs, job)
    except ClusterdiagError as exc:
        log("ERROR cannot start, exiting 0 so the node is not drained for it", error=exc)
        return EXIT_OK
    log.fields["node"] = env.node
    budget = float(config.section(program)["budget_s"])
    deadline = time.monotonic() - seconds_since_process_start() + budget
    run = Run(program, config, env, job, log, deadline, inputs)
    started = time.monotonic()
    try:
        outcome = body(run)
    except Exception as exc:  # noqa: BLE001 - our bug must not drain the node (fail open)
        return own_error(run, f"{type(exc).__name__}: {exc}")
    return (act or decide)(run, outcome, time.monotonic() - started)


def _setup(inputs: Inputs, job: JobEnv) -> tuple[Config, SourceEnv]:
    from .. import session

    config, env = session.setup(inputs.config_path, inputs.root, inputs.kernel_log,
                                inputs.simulate, inputs.node or job.node)
    return config, env


def own_error(run: Run, error: str) -> int:
    """clusterdiag could not judge the node: loud, and a drain only when fail_closed."""
    if not run.settings["fail_closed"]:
        run.log("ERROR could not check the node, exiting 0 (fail_closed is false)",
                error=error)
        return EXIT_OK
    run.log("ERROR could not check the node, failing (fail_closed is true)", error=error)
    if run.settings["drain"]:
        drain(run, clip(f"{PREFIX} {OWN_ERROR} {error}"))
    return EXIT_FAIL


def decide(run: Run, outcome: Outcome, seconds: float) -> int:
    fails = [f for f in outcome.findings if f.status is Status.FAIL]
    errors = [f for f in outcome.findings if f.status is Status.ERROR]
    summary = {"source": outcome.source, "seconds": f"{seconds:.2f}", **outcome.extra}
    for finding in errors:
        run.log("ERROR check could not run", check=finding.check,
                component=finding.component, error=finding.message)
    if fails:
        reason = drain_reason(fails, program=run.program)
        run.log("FAIL node not ready", reason=reason, fails=len(fails), **summary)
        if reason and run.settings["drain"]:
            drain(run, reason)
        return EXIT_FAIL
    if errors:
        return own_error(run, f"{len(errors)} check(s) could not run, first "
                              f"{errors[0].check}: {errors[0].message}")
    warns = sum(f.status is Status.WARN for f in outcome.findings)
    run.log("pass", warnings=warns, **summary)
    return EXIT_OK


def drain(run: Run, reason: str) -> None:
    """Drain with ``reason`` unless the node carries a reason that is not ours, or the
    epilog's, which only a person lifts (reason.py): another program's newer reason
    would hide it, and the health check would resume the node once that one passes."""
    scontrol = run.scontrol()
    name = run.env.node
    try:
        state = scontrol.show_node(name)
        if not owned(state.reason):
            run.log("kept the existing drain reason (not clusterdiag's)", state=state.state,
                    existing=state.reason)
            return
        existing = parse(state.reason)
        if state.drained and existing and existing.epilog and run.program != EPILOG:
            run.log("kept the epilog's drain reason", state=state.state,
                    existing=state.reason, reason=reason)
            return
        if state.drained and state.reason == reason:
            run.log("already drained with this reason", state=state.state)
            return
        scontrol.drain(name, reason)
    except SlurmError as exc:
        run.log("ERROR could not drain the node", error=exc, reason=reason)
        return
    run.log("drained", reason=reason)
