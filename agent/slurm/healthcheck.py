"""``clusterdiag healthcheck``: Slurm's HealthCheckProgram, run between jobs.

It runs the ``quick`` checks; a node that fails is drained (DRAIN lets a running job
finish) with a ``clusterdiag:`` reason, and a node that passes again is resumed, but
only when the current reason is ours: a node an operator drained stays drained. Slurm
kills the program at 60 s and gives it nothing but SLURMD_NODENAME, so its budget is
smaller (``healthcheck.budget_s``) and the wrapper must export SLURM_CONF.
"""

from __future__ import annotations

from ...checks.finding import Status
from ..runner import run_node
from .entry import EXIT_OK, Inputs, Outcome, Run, decide, execute
from .prolog import options
from .reason import owned
from .scontrol import SlurmError


def main(inputs: Inputs) -> int:
    return execute("healthcheck", inputs, check_idle_node, act)


def check_idle_node(run: Run) -> Outcome:
    report = run_node(run.env, run.config, options(run))
    return Outcome(report.findings, "own checks")


def resume_if_ours(run: Run) -> None:
    if not run.settings["resume"]:
        return
    try:
        scontrol = run.scontrol()
        state = scontrol.show_node(run.env.node)
        if not state.drained or not state.reason:
            return
        if not owned(state.reason):
            run.log("not resuming: drained for a reason that is not clusterdiag's",
                    state=state.state, existing=state.reason)
            return
        scontrol.resume(run.env.node)
    except SlurmError as exc:
        run.log("ERROR could not resume the node", error=exc)
        return
    run.log("resumed", previous=state.reason)


def act(run: Run, outcome: Outcome, seconds: float) -> int:
    """decide() drains on a fail; a clean pass also lifts our own drain."""
    code = decide(run, outcome, seconds)
    clean = not any(f.status in (Status.FAIL, Status.ERROR) for f in outcome.findings)
    if code == EXIT_OK and clean:
        resume_if_ours(run)
    return code
