"""``clusterdiag healthcheck``: Slurm's HealthCheckProgram, run between jobs.

It runs the ``quick`` checks; a node that fails is drained (DRAIN lets a running job
finish) with a ``clusterdiag:`` reason. A drained node is resumed only when the reason is
ours and the check it names passed again: in this pass, or in the agent's fresh report
for what this pass does not run (rate checks). Resuming on any clean pass would undo the
prolog's drains for rate checks and the epilog's for what happened during a job, and the
node would cycle drain, resume, job, drain. A node an operator drained stays drained.
Slurm kills the program at 60 s and gives it nothing but SLURMD_NODENAME, so its budget
is smaller (``healthcheck.budget_s``) and the wrapper must export SLURM_CONF.
"""

from __future__ import annotations

from ...checks.core.finding import Finding, Status
from ..base.errors import ExitCode
from ..run.runner import run_node
from .agent_report import Cached, load_trusted
from .entry import Inputs, Outcome, Run, decide, execute
from .prolog import JOB_DEPENDENT, options
from .reason import Lift, Verb, owned, parse
from .scontrol import SlurmError


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
              Verb.QUALIFY: "qualify's active test found it, which no health check runs"}


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


def resume_if_ours(run: Run, findings: list[Finding]) -> None:
    if not run.settings["resume"]:
        return
    try:
        scontrol = run.scontrol()
        state = scontrol.show_node(run.node)
        if not state.drained or not state.reason:
            return
        if not owned(state.reason):
            run.log("not resuming: drained for a reason that is not clusterdiag's",
                    state=state.state, existing=state.reason)
            return
        resume, why = may_resume(state.reason, findings,
                                 load_trusted(run.config, run.node))
        if not resume:
            run.log("not resuming", existing=state.reason, why=why)
            return
        scontrol.resume(run.node)
    except SlurmError as exc:
        run.log("ERROR could not resume the node", error=exc)
        return
    run.log("resumed", previous=state.reason, why=why)


def act(run: Run, outcome: Outcome, seconds: float) -> int:
    """decide() drains on a fail; a clean pass may also lift our own drain."""
    code = decide(run, outcome, seconds)
    clean = not any(f.status in (Status.FAIL, Status.ERROR) for f in outcome.findings)
    if code == ExitCode.READY and clean:
        resume_if_ours(run, outcome.findings)
    return code
