"""``clusterdiag healthcheck``: Slurm's HealthCheckProgram, run between jobs.

It runs the ``quick`` checks; a node that fails is drained (DRAIN lets a running job
finish) with a ``clusterdiag:`` reason. After a clean pass it walks the node's way back
(way_back.py, docs/return-to-service.md): on a node Slurm reports fully drained for a
reason of ours that names a check, it starts the validation the incident's fault class
declares (``clusterdiag validate``) in the background, and resumes the node at a later run
only when that validation passed; a node an operator returned with its incident open is
validated while idle and drained again only if the validation fails. Our own trouble
(``clusterdiag: error``) is lifted once a pass is clean, as it carries no fault. A node
an operator, NHC or Slurm drained stays drained, its reason untouched.
Slurm kills the program at 60 s and gives it nothing but SLURMD_NODENAME, so its budget
is smaller (``healthcheck.budget_s``) and the wrapper must export SLURM_CONF.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ...checks.core.finding import Finding, Status
from ..base.errors import ExitCode
from ..health import lock, store
from ..health import policy as health_policy
from ..health.lifecycle import Health
from ..run.runner import run_node
from .agent_report import Cached, load_trusted
from .entry import Inputs, Outcome, Run, decide, execute
from .incidents import Gate, peers
from .prolog import JOB_DEPENDENT, options
from .reason import Lift, Reason, Verb, owned, parse, write
from .scontrol import NodeState, Scontrol, SlurmError
from .way_back import Do, Policy, Step, plan, rechecked, unrecorded

# The validation's own output, replaced at each start: one run's lines at most.
VALIDATE_LOG = "validate.log"

Clock = Callable[[], float]
# Starts ``clusterdiag validate`` holding the lock's descriptor and returns its pid
# (``start_validation``; a simulation hands in its own).
Start = Callable[[Run, Path, int], int]


def main(inputs: Inputs) -> int:
    return execute("healthcheck", inputs, check_idle_node, act)


def check_idle_node(run: Run) -> Outcome:
    report = run_node(run.env, run.config, options(run))
    return Outcome(report.findings, "own checks")


def _verdict(check: str, findings: list[Finding]) -> bool | None:
    """Whether ``check`` passed; None when it did not run (no finding, or only skips)."""
    ran = [f for f in findings if f.check == check and f.status is not Status.SKIP]
    if not ran:
        return None
    return all(f.status in (Status.PASS, Status.WARN) for f in ran)


# Why a reason that only a person lifts (reason.Lift.PERSON) stays, for the log.
_BY_PERSON = {Verb.EPILOG: "the epilog saw it during a job, which no later check sees again",
              Verb.QUALIFY: "qualify's active test found it, which no health check runs",
              Verb.REPAIR: "held for repair as a repeat offender"}


def may_resume(reason: str, own: list[Finding], agent: Cached) -> tuple[bool, str]:
    """Whether a node drained with ``reason`` (ours) may be resumed after a clean pass
    that found ``own``, and why, for the log."""
    parsed = parse(reason)
    if parsed is None:
        return False, "not clusterdiag's reason"
    if parsed.lift is Lift.PERSON:
        return False, f"{_BY_PERSON[parsed.verb]}: a person resumes the node"
    failing = sorted({f.check for f in agent.report.findings if f.status is Status.FAIL}) \
        if agent.report else []
    if failing:
        return False, f"the agent's report still fails {','.join(failing)}"
    check = parsed.check
    if check is None:  # Lift.CLEAN
        return True, "clusterdiag can check the node again"
    if check in JOB_DEPENDENT:
        return False, (f"{check} is judged only for a job (the health check notes it): a "
                       "person resumes the node")
    verdict, source = _verdict(check, own), "this pass"
    if verdict is None and agent.report is not None:
        verdict, source = _verdict(check, agent.report.findings), agent.why
    if verdict is None:
        where = agent.why if agent.report is None else "nor in the agent's report"
        return False, f"{check} did not run in this pass ({where})"
    if not verdict:
        return False, f"{check} still fails ({source})"
    return True, f"{check} passed ({source})"


def resume_if_ours(run: Run, findings: list[Finding], clock: Clock = time.time,
                   start: Start | None = None) -> None:
    """After a clean pass: lift our own trouble, or walk the node's way back.
    ``clock`` and ``start`` are the time and the validation's start (a simulated week
    hands in its own)."""
    if not run.settings["resume"]:
        return
    try:
        scontrol = run.scontrol()
        state = scontrol.show_node(run.node)
        if state.drained and not state.reason:
            return
        if state.drained and not owned(state.reason):
            run.log("not resuming: drained for a reason that is not clusterdiag's",
                    state=state.state, existing=state.reason)
            return
        parsed = parse(state.reason) if state.drained else None
        if parsed is not None and parsed.check is None:  # our own trouble, no fault
            _resume_when_clean(run, scontrol, state, findings)
            return
        way_back(run, scontrol, state, findings, clock, start)
    except SlurmError as exc:
        run.log("ERROR could not resume the node", error=exc)


def _resume_when_clean(run: Run, scontrol: Scontrol, state: NodeState,
                       findings: list[Finding]) -> None:
    assert state.reason is not None
    resume, why = may_resume(state.reason, findings, load_trusted(run.config, run.node))
    if not resume:
        run.log("not resuming", existing=state.reason, why=why)
        return
    scontrol.resume(run.node)
    run.log("resumed", previous=state.reason, why=why)


def policy(run: Run) -> Policy:
    section = run.config.section("health")
    return Policy(int(section["validation_tries"]), str(section["on_validation_error"]),
                  dict(section["hold_down_s"]))


def way_back(run: Run, scontrol: Scontrol, state: NodeState, findings: list[Finding],
             clock: Clock = time.time, start: Start | None = None) -> None:
    """Decide under the validation lock (way_back.plan), save the lifecycle, then act: a
    validation started here inherits the lock, so no other starts until it ends. The
    node's recent own drains are judged against the fleet first (``rejudge``)."""
    state_dir = Path(run.config.section("agent")["state_dir"])
    try:
        fd = lock.take(state_dir)
    except OSError as exc:
        run.log("ERROR validation lock unusable, node left as it is",
                lock=lock.path(state_dir), error=exc.strerror or exc)
        return
    try:
        health = store.load(state_dir)
        state = rejudge(run, scontrol, state, health, state_dir, clock())
        health = record_unrecorded(run, scontrol, state, health, state_dir, clock)
        step = plan(state, health, fd is None, policy(run), clock())
        if step.do is Do.NOTHING and not step.changed:
            if health.open is not None or state.drained:
                run.log("not resuming", existing=state.reason, why=step.why)
            return
        if step.do is Do.RECHECK:
            step = _recheck(run, step, findings, health, state, clock())
        if step.changed:
            store.save(state_dir, health)
        _act(run, scontrol, state, step, state_dir, fd, start or start_validation)
    except OSError as exc:
        run.log("ERROR could not keep the node's lifecycle, node left as it is",
                state_dir=state_dir, error=exc.strerror or exc)
    finally:
        if fd is not None:
            os.close(fd)


def record_unrecorded(run: Run, scontrol: Scontrol, state: NodeState, health: Health,
                      state_dir: Path, clock: Clock) -> Health:
    """A drain of ours the lifecycle has not recorded (way_back.unrecorded: ``qualify
    --drain`` drains from a head node, which cannot reach the node's state directory) is
    recorded as the gate records its own, at the time Slurm set the reason: a strike, a
    fleet event, or the hold of a repeat offender. Returns the lifecycle after it."""
    reason = unrecorded(state, health)
    if reason is None:
        return health
    at = state.reason_time if state.reason_time is not None else clock()
    Gate(run, scontrol, NodeState(state.name, "IDLE", None), reason, lambda: at).drained()
    return store.load(state_dir)


def rejudge(run: Run, scontrol: Scontrol, state: NodeState, health: Health,
            state_dir: Path, now: float) -> NodeState:
    """The node's recent drains counted as its own, judged against the fleet as Slurm
    shows it now (health_policy.reclassify: the first drains of a fleet event read as the
    nodes' own when they happen). Read only when such a drain is recent (one
    ``scontrol show node -o``, as the gate reads it). A hold undone puts the open
    incident's reason back (a ``repair`` reason stops the way back), and the node is
    validated as any drained node is. A fleet that cannot be read is logged and leaves
    the lifecycle as it is. Returns Slurm's view of the node after it."""
    settings = health_policy.Settings.of(run.config.section("health"))
    if not health_policy.rejudge_due(health, now, settings):
        return state
    try:
        fleet = peers(scontrol.show_nodes())
    except SlurmError as exc:
        run.log("ERROR could not read the fleet from Slurm: the node's recent drains are "
                "not judged again", error=exc)
        return state
    found = health_policy.reclassify(health, fleet, run.node, now, settings)
    if not found.incidents:
        return state
    after = state
    if found.unheld and health.open is not None:
        incident = health.open
        text = write(Reason(Verb.NONE, incident.check, incident.component,
                            incident.evidence))
        try:
            scontrol.drain(run.node, text)
        except SlurmError as exc:  # still held in Slurm: judged again at the next run
            run.log("ERROR could not lift the repair reason of a fleet event", error=exc,
                    reason=text)
            return state
        run.log("no longer held for repair: its strikes were a fleet event", reason=text)
        after = NodeState(state.name, state.state, text, now)
    store.save(state_dir, health)
    run.log("drains judged a fleet event after all, no strike", drains=found.incidents,
            state=health.state.value)
    return after


def _recheck(run: Run, step: Step, findings: list[Finding], health: Health,
             state: NodeState, now: float) -> Step:
    """The ``recheck`` fallback: the check passing again, as may_resume judges it."""
    assert step.reason is not None
    ok, why = may_resume(step.reason, findings, load_trusted(run.config, run.node))
    if not ok:
        return Step(Do.DRAIN if state.drained else Do.NOTHING, f"{step.why}; {why}",
                    step.reason, step.changed)
    rechecked(health, f"{why} ({step.why.removeprefix('ERROR ')})", now)
    return Step(Do.RESUME if state.drained else Do.NOTHING, f"{step.why}; {why}", step.reason,
                True)


def _act(run: Run, scontrol: Scontrol, state: NodeState, step: Step, state_dir: Path,
         fd: int | None, start: Start) -> None:
    if step.reason is not None and step.reason != state.reason and step.do is not Do.RESUME:
        scontrol.drain(run.node, step.reason)
        run.log("drained", reason=step.reason, why=step.why)
    if step.do is Do.RESUME:
        scontrol.resume(run.node)
        run.log("resumed", previous=state.reason, why=step.why)
    elif step.do is Do.START and fd is not None:
        pid = start(run, state_dir, fd)
        run.log("validation started", pid=pid, why=step.why, log=state_dir / VALIDATE_LOG)
    elif step.do is Do.NOTHING or step.reason == state.reason:
        run.log("not resuming", existing=state.reason, why=step.why)


def validate_argv(run: Run, state_dir: Path, fd: int) -> list[str]:
    """``clusterdiag validate`` for this node, with this run's config and sources, and the
    lock it inherits; this interpreter and package, never a shell."""
    package = __name__.rsplit(".", 2)[0]  # clusterdiag.agent
    argv = [sys.executable, "-m", package, "validate", "--node", run.node, "--state-dir",
            str(state_dir), "--lock-fd", str(fd)]
    given = run.inputs
    for flag, value in (("--config", given.config_path), ("--simulate", given.simulate),
                        ("--root", given.root)):
        if value is not None:
            argv += [flag, str(value)]
    return argv


def start_validation(run: Run, state_dir: Path, fd: int) -> int:
    """Start the validation and return at once: Slurm kills the health check at 60 s
    (slurm.conf(5), HealthCheckProgram), and a qualify test takes minutes. Its own session
    (setsid(2): no signal to the health check's process group reaches it), stdin from
    /dev/null, its output in ``VALIDATE_LOG`` (replaced at each start: bounded by one run),
    and the lock's descriptor kept open in it (``pass_fds``), so the lock stays held until
    the validation ends."""
    out = os.open(state_dir / VALIDATE_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                  | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        child = subprocess.Popen(validate_argv(run, state_dir, fd), stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=out, pass_fds=(fd,),
                                 start_new_session=True)
    finally:
        os.close(out)
    return child.pid


def act(run: Run, outcome: Outcome, seconds: float) -> int:
    """decide() drains on a fail; a clean pass may also lift our own drain."""
    code = decide(run, outcome, seconds)
    clean = not any(f.status in (Status.FAIL, Status.ERROR) for f in outcome.findings)
    if code == ExitCode.READY and clean:
        resume_if_ours(run, outcome.findings)
    return code
