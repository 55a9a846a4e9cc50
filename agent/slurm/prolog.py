"""``clusterdiag prolog``: is this node fit for the job about to start on it?

Fast path: the agent's fresh report (see ``agent_report``) stands in for a collection,
and only the checks the hardened agent had to skip for lack of privilege (``privileged``
in the registry, ``skip`` in its report) run here, as root. Without a fresh report the
prolog runs the ``quick`` checks itself. Either way everything, scontrol included, fits in
``prolog.budget_s`` (8 s, inside Slurm's default 10 s MessageTimeout): NVML runs in a
worker killed at its deadline, and scontrol is only called on a fail, keeping Slurm
commands off the passing path as SchedMD asks.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ... import checks as catalog
from ...checks.finding import Finding, Status
from ...reports.node import NodeReport
from ..config import Config
from ..runner import RunOptions, plan, run_node
from .agent_report import load_fresh
from .entry import Inputs, Outcome, Run, execute


def main(inputs: Inputs) -> int:
    return execute("prolog", inputs, check_node)


def job_config(config: Config, gpus: tuple[int, ...] | None) -> Config:
    """The config with the job's GPUs for ``gpu.processes``, unless the file pins them."""
    if gpus is None or "job_gpus" in (config.data["checks"].get("gpu.processes") or {}):
        return config
    data = dict(config.data)
    data["checks"] = {**data["checks"], "gpu.processes": {
        **(data["checks"].get("gpu.processes") or {}), "job_gpus": list(gpus)}}
    return Config(data, config.path)


def options(run: Run, patterns: tuple[str, ...] = ()) -> RunOptions:
    from ..cli import _options

    opts: RunOptions = _options(run.config, run.inputs.level or "quick", run.inputs.profile,
                                run.collect_budget(), None, mode=run.program)
    return replace(opts, patterns=patterns)


def check_node(run: Run) -> Outcome:
    run.config = job_config(run.config, run.job.gpus)
    agent = run.config.section("agent")
    prolog = run.config.section("prolog")
    cached = load_fresh(Path(agent["state_dir"]), run.env.node,
                        max_age_s=prolog["max_report_age_s"],
                        default_interval_s=float(agent["interval_s"]))
    if cached.report is None:
        run.log("running the quick checks", why=cached.why)
        report = run_node(run.env, run.config, options(run))
        return Outcome(report.findings, "own checks")
    findings, rerun = from_agent(run.config, cached.report)
    if rerun:
        report = run_node(run.env, run.config, options(run, tuple(sorted(rerun))))
        findings.extend(report.findings)
    extra = {"reran": ",".join(sorted(rerun)) or None}
    return Outcome(findings, cached.why, extra)


def from_agent(config: Config, report: NodeReport) -> tuple[list[Finding], set[str]]:
    """The agent's findings for the checks a prolog runs, and the privileged checks it
    skipped, which the prolog must run itself."""
    specs, not_run = plan(config, RunOptions(level=report.level, mode="prolog"))
    wanted = {spec.id for spec in specs}
    rerun = {f.check for f in report.findings
             if f.status is Status.SKIP and f.check in wanted
             and catalog.REGISTRY[f.check].privileged}
    kept = [f for f in report.findings if f.check in wanted and f.check not in rerun]
    return [*not_run, *kept], rerun
