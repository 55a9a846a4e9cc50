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

from ...checks.core import index
from ...checks.core.finding import Finding, Status
from ..health import lock
from ..read import nvml_library
from ..run import session
from ..settings.config import Config
from .agent_report import AgentReport, load_trusted
from .entry import Inputs, Outcome, Run, execute

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from ..run.runner import RunOptions
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
    from ..model.record import replace  # records are off the fresh-report prolog path

    opts = session.run_options(run.config, run.inputs.level or "quick", run.inputs.profile,
                                run.collect_budget(), None, mode=run.program)
    return replace(opts, patterns=patterns)


def check_node(run: Run) -> Outcome:
    if lock.running(run.config.section("agent")["state_dir"]):
        refused = validation_running(run)
        if refused is not None:
            return refused
    run.config = job_config(run.config, run.job)
    cached = load_trusted(run.config, run.node)
    if cached.report is None:
        from ..run.runner import run_node  # the runner only without a fresh agent report

        run.log("running the quick checks", why=cached.why)
        report = run_node(run.env, run.config, options(run))
        return Outcome(report.findings, "own checks")
    findings, rerun = from_agent(run.config, cached.report)
    if rerun:
        findings.extend(rerun_findings(run, cached.report, rerun))
    extra = {"reran": ",".join(sorted(rerun)) or None,
             "unchanged": ",".join(sorted(run.unchanged)) or None}
    return Outcome(findings, cached.why, extra)


def validation_running(run: Run) -> Outcome | None:
    """A validation holds the lock (agent/health/lock.py): an operator returned the node
    half-way through it. The job is refused, the node drained for the incident under
    validation, so the burn and the job never share the GPUs and the health check resumes
    the node when the validation passes. A lock held with no incident open is the health
    check deciding, for a moment, that there is nothing to validate: None, and the node
    is judged as on any job (a held lock never stands in for the checks)."""
    from pathlib import Path  # pathlib and the lifecycle only while a validation runs

    from ..health.store import HealthFile

    incident = HealthFile(Path(run.config.section("agent")["state_dir"])).current().open
    if incident is None:
        return None
    return Outcome([Finding(Status.FAIL, incident.component, "a validation is running",
                            check=incident.check)], "validation lock")


def rerun_findings(run: Run, report: AgentReport, checks: set[str]) -> list[Finding]:
    """The checks the prolog runs on top of the agent's report. Where NVML's library cannot
    be loaded, each that needs NVML skips pointing at gpu.responsive (the runner's rule,
    ``index.nvml_down_skip``), said without importing pynvml and the collectors
    (agent/read/nvml_library.py). The rest, under a known profile and at ``quick``: each
    PCI check whose verdict the prolog recorded on the same bus and bridges is not judged
    again (``rerun_record``), whatever else is re-run beside it (gpu.processes on a GPU
    node); the others the lean path judges (agent/run/lean.py: their families and their
    sources' collectors only); the runner only where detection or a second sample is
    needed."""
    known = index.known()
    entries = [known[c] for c in sorted(checks)]
    findings: list[Finding] = []
    nvml_judged = [e for e in entries
                   if "nvml" in e.needs and e.id not in index.NVML_DOWN_JUDGES]
    if nvml_judged and run.uses_real_nvml() and nvml_library.missing():
        findings = [index.nvml_down_skip(e.id, nvml_library.NOT_FOUND) for e in nvml_judged]
        entries = [e for e in entries if e not in nvml_judged]
        if not entries:
            return findings
    profile = rerun_profile(run, report)
    level = run.inputs.level or "quick"
    from . import rerun_record  # the record only where the agent's report left checks over

    root = run.host_root()
    if profile != "auto" and level == "quick" and root is not None:
        recordable = [e for e in entries if rerun_record.suits([e])]
        if recordable:
            findings += recorded_rerun(run, recordable, profile, root)
            entries = [e for e in entries if e not in recordable]
            if not entries:
                return findings
    ids = [e.id for e in entries]
    from ..run import lean  # the lean re-run only for checks the agent could not judge

    if profile != "auto" and lean.suits(entries, level):
        return [*findings, *lean.run_checks(run.env, run.config, ids, profile, run.program,
                                            run.collect_budget())]
    from ..model.record import replace  # records are off the fresh-report prolog path
    from ..run.runner import run_node  # the runner only where profile or level need it

    opts = replace(options(run, tuple(ids)), profile=profile)
    return [*findings, *run_node(run.env, run.config, opts).findings]


def recorded_rerun(run: Run, entries: list[index.Entry], profile: str, root: str
                   ) -> list[Finding]:
    """PCI checks judged on the bus and the bridges' config (``rerun_record``) of the tree
    at ``root``: their recorded verdict while those read as root now are as they were,
    else judged on the lean path and recorded."""
    from .rerun_record import RerunRecord  # loaded by rerun_findings already

    record = RerunRecord(root, entries, profile, run.program)
    kept = record.findings()
    if kept is not None:
        run.unchanged.update(e.id for e in entries)
        return kept
    run.log("judging again", checks=",".join(e.id for e in entries), why=record.why)
    from ..run import lean  # the lean re-run only when the bus or a bridge changed

    env = run.env
    env.acs_read = []
    judged = lean.run_checks(env, run.config, [e.id for e in entries], profile, run.program,
                             run.collect_budget())
    record.keep(judged, env.acs_read)
    if record.why:
        run.log("re-run record not kept", why=record.why)
    return judged


def rerun_profile(run: Run, report: AgentReport) -> str:
    """The profile the re-run checks judge under: the flag's or the config's, else (for
    ``auto``) the agent's resolved one. Detecting it again would collect PCI and host
    data too, where gpu.processes needs NVML alone; ``auto`` only when the agent names
    none this install knows (a built-in one is known without loading the profiles)."""
    given = run.inputs.profile
    chosen = session.site_profile(run.config, given) if given else run.config.data["profile"]
    name = report.profile.get("name") if isinstance(report.profile, dict) else None
    if chosen != "auto" or not isinstance(name, str):
        return str(chosen)
    from ...checks.catalogs.profile_data import PROFILES  # the built-in ones, as data

    if name in PROFILES:
        return name
    # The profiles' loader only for a name that is not a built-in one.
    from ...checks.profiles.profile import UnknownProfileError, load_profile

    try:
        load_profile(name)
    except UnknownProfileError:
        run.log("agent report names an unknown profile, detecting it", profile=name)
        return "auto"
    return name


def from_agent(config: Config, report: AgentReport) -> tuple[list[Finding], set[str]]:
    """The agent's findings for the checks a prolog runs, and the checks the prolog must
    run itself: privileged ones the agent skipped, and every job-dependent one. Planned
    from the catalog's manifest: no check family is imported."""
    entries, not_run = index.plan((), config.disabled(), report.level, "prolog")
    wanted = {entry.id: entry for entry in entries}
    rerun = {f.check for f in report.findings
             if f.status is Status.SKIP and f.check in wanted and wanted[f.check].privileged}
    rerun |= JOB_DEPENDENT & wanted.keys()
    kept = [f for f in report.findings if f.check in wanted and f.check not in rerun]
    return [*not_run, *kept], rerun
