"""``clusterdiag prolog``: is this node fit for the job about to start on it?

Fast path: the agent's fresh report (see ``agent_report``) stands in for a collection.
Two kinds of check still run here, as root: those the hardened agent had to skip for lack
of privilege (``privileged`` in the registry, ``skip`` in its report), and those whose
verdict depends on the mode or the job rather than on the node alone (``JOB_DEPENDENT``),
which the agent cannot judge for a job it does not know. Without a fresh report the
prolog runs the ``quick`` checks itself. Either way everything, scontrol included, fits in
``prolog.budget_s`` (8 s, inside Slurm's default 10 s MessageTimeout): NVML runs in a
worker killed at its deadline, and scontrol is only called on a fail, keeping Slurm
commands off the passing path as SchedMD asks.
"""

from __future__ import annotations

from dataclasses import replace

from ... import checks as catalog
from ...checks.finding import Finding, Status
from ...checks.profile import UnknownProfileError, load_profile
from ...reports.node import NodeReport
from ..config import Config
from ..runner import RunOptions, plan, run_node
from .agent_report import load_trusted
from .entry import Inputs, Outcome, Run, execute
from .job import JobEnv

# The agent's verdict on these does not hold for the job. gpu.processes only notes
# processes in the agent (they may belong to the running job) and fails them before a job,
# on the job's GPUs only (job_gpus). nccl.env and nccl.host_limits read ctx.mode too, but
# only ``run`` judges differently (its own environment and limits): the agent and the
# prolog judge the same files, so the agent's word stands for them.
JOB_DEPENDENT = frozenset({"gpu.processes"})


def main(inputs: Inputs) -> int:
    return execute("prolog", inputs, check_node)


def job_config(config: Config, job: JobEnv) -> Config:
    """The config with the job for ``gpu.processes``: its id (to tell its processes from
    other jobs'), its GPUs and whether it shares them; the file's own settings win."""
    own = dict(config.data["checks"].get("gpu.processes") or {})
    given = {"job_id": job.job_id, "job_gpus": list(job.gpus) if job.gpus else None,
             "shared": job.shared or None}
    own.update({k: v for k, v in given.items() if v is not None and k not in own})
    data = dict(config.data)
    data["checks"] = {**data["checks"], "gpu.processes": own}
    return Config(data, config.path)


def options(run: Run, patterns: tuple[str, ...] = ()) -> RunOptions:
    from .. import session

    opts = session.run_options(run.config, run.inputs.level or "quick", run.inputs.profile,
                                run.collect_budget(), None, mode=run.program)
    return replace(opts, patterns=patterns)


def check_node(run: Run) -> Outcome:
    run.config = job_config(run.config, run.job)
    cached = load_trusted(run.config, run.env.node)
    if cached.report is None:
        run.log("running the quick checks", why=cached.why)
        report = run_node(run.env, run.config, options(run))
        return Outcome(report.findings, "own checks")
    findings, rerun = from_agent(run.config, cached.report)
    if rerun:
        report = run_node(run.env, run.config, rerun_options(run, cached.report, rerun))
        findings.extend(report.findings)
    extra = {"reran": ",".join(sorted(rerun)) or None}
    return Outcome(findings, cached.why, extra)


def rerun_options(run: Run, report: NodeReport, checks: set[str]) -> RunOptions:
    """Options for the checks run on top of the agent's report. The agent's resolved
    profile replaces ``auto``: detecting it again would collect PCI and host data too,
    where gpu.processes needs NVML alone."""
    opts = options(run, tuple(sorted(checks)))
    name = report.profile.get("name") if isinstance(report.profile, dict) else None
    if opts.profile != "auto" or not isinstance(name, str):
        return opts
    try:
        load_profile(name)
    except UnknownProfileError:
        run.log("agent report names an unknown profile, detecting it", profile=name)
        return opts
    return replace(opts, profile=name)


def from_agent(config: Config, report: NodeReport) -> tuple[list[Finding], set[str]]:
    """The agent's findings for the checks a prolog runs, and the checks the prolog must
    run itself: privileged ones the agent skipped, and every job-dependent one."""
    specs, not_run = plan(config, RunOptions(level=report.level, mode="prolog"))
    wanted = {spec.id for spec in specs}
    rerun = {f.check for f in report.findings
             if f.status is Status.SKIP and f.check in wanted
             and catalog.REGISTRY[f.check].privileged}
    rerun |= JOB_DEPENDENT & wanted
    kept = [f for f in report.findings if f.check in wanted and f.check not in rerun]
    return [*not_run, *kept], rerun
