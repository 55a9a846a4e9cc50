"""What the prolog, epilog and health check share: setup, the budget, and the exit policy.

Slurm drains a node on any non-zero prolog or epilog exit, so the exit code carries one
meaning only: the node failed a check. clusterdiag's own trouble (a bad config, a check
that could not run, a crash) exits 0 with a loud line on stderr, unless ``fail_closed``
says a node we cannot vouch for must not take jobs. On a fail the node is drained with a
reason of our own (``clusterdiag: ...``), never over one an operator or Slurm set.

The prolog runs this on every node for every job, so what its passing path does not use
is imported where it is used: scontrol only for a drain, the sources (``SourceEnv``)
only when a check must collect; the classes here are plain ones, since importing
``dataclasses`` alone costs as much as starting the interpreter.
"""

from __future__ import annotations

import time

from ...checks.core.finding import Status
from ..base.errors import ClusterdiagError, ExitCode
from ..run import session
from ..settings.config_cache import RootStore
from .job import JobEnv, seconds_since_process_start
from .log import Log
from .reason import Lift, Verb, from_error, from_findings, owned, parse, write

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from ...checks.core.finding import Finding
    from ..read.sources import SourceEnv
    from ..settings.config import Config
    from .reason import Reason
    from .scontrol import Scontrol

    Body = Callable[["Run"], "Outcome"]
    Act = Callable[["Run", "Outcome", float], int]

SCONTROL_CALLS = 2  # drain() and resume_if_ours(): show node, then update
# Kept back from the budget for what follows the last scontrol call: the log line, the
# interpreter's exit and the process's teardown, seconds on a loaded node. Slurm counts
# them against PrologEpilogTimeout, and a prolog killed at it drains the node with
# Slurm's generic "Prolog error".
EXIT_S = 0.5


class Inputs:
    """The command line, as the source flags give it (docs/design.md §3)."""
    __slots__ = ("config_path", "kernel_log", "level", "node", "profile", "root", "simulate")

    def __init__(self, config_path: str | Path | None = None, root: str | Path | None = None,
                 kernel_log: str | Path | None = None, simulate: str | None = None,
                 node: str | None = None, profile: str | None = None,
                 level: str | None = None) -> None:
        self.config_path = config_path
        self.root = root
        self.kernel_log = kernel_log
        self.simulate = simulate
        self.node = node
        self.profile = profile
        self.level = level


class Outcome:
    """What a program concluded: its findings and where they came from."""
    __slots__ = ("extra", "findings", "source")

    def __init__(self, findings: list[Finding], source: str,
                 extra: dict[str, Any] | None = None) -> None:
        self.findings = findings
        self.source = source
        self.extra: dict[str, Any] = {} if extra is None else extra


class Run:
    """One program's run. ``env`` (where the node is read from) is made when first asked
    for: with a fresh agent report the prolog may never need it."""

    def __init__(self, program: str, config: Config, env: SourceEnv | None, job: JobEnv,
                 log: Log, deadline: float, inputs: Inputs, node: str | None = None) -> None:
        if node is None:
            if env is None:
                raise ValueError("a Run needs the node's name or its sources")
            node = env.node
        self.program = program
        self.config = config
        self.node = node
        self.job = job
        self.log = log
        self.deadline = deadline  # monotonic; the whole program, scontrol included
        self.inputs = inputs
        self._env = env
        # Checks whose verdict the prolog recorded and found standing (rerun_record.py).
        self.unchanged: set[str] = set()

    @property
    def env(self) -> SourceEnv:
        if self._env is None:
            self._env = session.source_env(self.config, self.inputs.root,
                                           self.inputs.kernel_log, None, self.node)
            self._env.counters = self.rates_judged()
        return self._env

    def rates_judged(self) -> bool:
        """Whether this run's checks compare counters (rate checks run at ``full`` only):
        else the node's counters are not read at all, and the report they would fill in
        is never written by a Slurm program (SourceEnv.counters)."""
        return (self.inputs.level or "quick") != "quick"

    def host_root(self) -> str | None:
        """The tree the node is read from (``/`` or ``--root``), without making the
        sources; None when they are the simulator's."""
        if self._env is None:
            return str(self.inputs.root or "/")
        return None if self._env.simulated else str(self._env.root)

    def uses_real_nvml(self) -> bool:
        """Whether NVML is read through the real pynvml (not the simulator's)."""
        if self._env is None:
            return True  # the sources made for this run will be the host's
        from ..read.sources import real_nvml  # the sources are off the fresh-report prolog path

        return self._env.nvml is real_nvml

    @property
    def settings(self) -> dict[str, Any]:
        return self.config.section(self.program)

    def scontrol(self) -> Scontrol:
        # Scontrol's module only where Slurm is asked.
        from .scontrol import DEFAULT_TIMEOUT_S, Scontrol

        return Scontrol(self.config.section("prolog").get("scontrol"),
                        timeout_s=DEFAULT_TIMEOUT_S, deadline=self.deadline - EXIT_S)

    def collect_budget(self) -> float:
        """What is left for collecting once scontrol's timeouts are set aside: a drain or
        a resume is two calls (``show`` to protect an operator's reason, then ``update``),
        and an update cut short leaves Slurm to drain with its generic "Prolog error"."""
        from .scontrol import DEFAULT_TIMEOUT_S  # scontrol's module only where Slurm is asked

        return max(0.5, self.deadline - time.monotonic() - SCONTROL_CALLS * DEFAULT_TIMEOUT_S
                   - EXIT_S)




def execute(program: str, inputs: Inputs, body: Body, act: Act | None = None) -> int:
    """Set up, run ``body``, then act on what it found (``decide`` unless given);
    returns the exit code."""
    job = JobEnv.from_environ()
    log = Log(program, job=job.job_id, user=job.user, node=inputs.node or job.node)
    log("start")
    cache = RootStore() if program == "prolog" else None
    try:
        config, node, env = _setup(inputs, job, cache)
    except ClusterdiagError as exc:
        log("ERROR cannot start, exiting 0 so the node is not drained for it", error=exc)
        return ExitCode.READY
    if cache is not None and cache.why is not None:
        log("config cache not used, the YAML was parsed", why=cache.why)
    log.fields["node"] = node
    budget = float(config.section(program)["budget_s"])
    deadline = time.monotonic() - seconds_since_process_start() + budget
    run = Run(program, config, env, job, log, deadline, inputs, node)
    started = time.monotonic()
    try:
        outcome = body(run)
    except Exception as exc:  # noqa: BLE001 - our bug must not drain the node (fail open)
        return own_error(run, f"{type(exc).__name__}: {exc}")
    return (act or decide)(run, outcome, time.monotonic() - started)


def _setup(inputs: Inputs, job: JobEnv, cache: RootStore | None = None
           ) -> tuple[Config, str, SourceEnv | None]:
    """The config (a YAML file through the prolog's ``cache``), the node's name, and the
    simulator's sources when simulating (else the sources are made when a check needs
    them: ``Run.env``)."""
    node = inputs.node or job.node
    if inputs.simulate is not None:
        config, env = session.setup(inputs.config_path, inputs.root, inputs.kernel_log,
                                    inputs.simulate, node)
        return config, env.node, env
    config = session.load(inputs.config_path, cache)
    session.check_places(inputs.root, inputs.kernel_log)
    return config, session.node_name(config, node), None


def own_error(run: Run, error: str) -> int:
    """clusterdiag could not judge the node: loud, and a drain only when fail_closed."""
    if not run.settings["fail_closed"]:
        run.log("ERROR could not check the node, exiting 0 (fail_closed is false)",
                error=error)
        return ExitCode.READY
    run.log("ERROR could not check the node, failing (fail_closed is true)", error=error)
    if run.settings["drain"]:
        drain(run, write(from_error(error)))
    return ExitCode.FAIL


def decide(run: Run, outcome: Outcome, seconds: float) -> int:
    fails = [f for f in outcome.findings if f.status is Status.FAIL]
    errors = [f for f in outcome.findings if f.status is Status.ERROR]
    summary = {"source": outcome.source, "seconds": f"{seconds:.2f}", **outcome.extra}
    for finding in errors:
        run.log("ERROR check could not run", check=finding.check,
                component=finding.component, error=finding.message)
    if fails:
        picked = from_findings(fails, program=run.program)
        text = write(picked) if picked else None
        run.log("FAIL node not ready", reason=text, fails=len(fails), **summary)
        if text and run.settings["drain"]:
            drain(run, text, picked)
        return ExitCode.FAIL
    if errors:
        return own_error(run, f"{len(errors)} check(s) could not run, first "
                              f"{errors[0].check}: {errors[0].message}")
    warns = sum(f.status is Status.WARN for f in outcome.findings)
    run.log("pass", warnings=warns, **summary)
    return ExitCode.READY


def drain(run: Run, reason: str, picked: Reason | None = None,
          clock: Callable[[], float] | None = None) -> None:
    """Drain with ``reason`` unless the node carries a reason that is not ours, or one
    of ours that only a person lifts (``Lift.PERSON``: the epilog's, qualify's, repair's)
    and this program's would not: the newer reason would hide it, and the health check
    would resume the node once that one passes. A drain that happened is an incident in
    the node's lifecycle (incidents.py: strikes, fleet events, the circuit breaker, which
    may stop the health check's drain); ``picked`` is the reason unabridged (its
    figure), else it is read back from ``reason``; ``clock`` the gate's time (a
    simulated week's; the wall clock by default)."""
    from .incidents import Gate  # the lifecycle only where a node is drained
    from .scontrol import SlurmError  # scontrol's module only where Slurm is asked

    scontrol = run.scontrol()
    name = run.node
    try:
        state = scontrol.show_node(name)
        if not owned(state.reason):
            run.log("kept the existing drain reason (not clusterdiag's)", state=state.state,
                    existing=state.reason)
            return
        existing = parse(state.reason)
        if state.drained and existing and existing.lift is Lift.PERSON \
                and Verb.of(run.program) is not existing.verb:
            run.log(f"kept the {existing.verb.value}'s drain reason", state=state.state,
                    existing=state.reason, reason=reason)
            return
        if state.drained and state.reason == reason:
            run.log("already drained with this reason", state=state.state)
            return
        gate = Gate(run, scontrol, state, picked or parse(reason), clock or time.time)
        if gate.stops_drain():
            return
        scontrol.drain(name, reason)
    except SlurmError as exc:
        run.log("ERROR could not drain the node", error=exc, reason=reason)
        return
    run.log("drained", reason=reason)
    gate.drained()
