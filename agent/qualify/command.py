"""``clusterdiag qualify`` end to end, apart from the flags: which nodes and launcher, the
profile of each node, the run (or the logs), the report, the baseline, the drain.

Defaults: inside a Slurm allocation the nodes are ``SLURM_JOB_NODELIST`` and the
launcher ``srun``; with ``--nodes`` outside one, ssh; otherwise this node, locally. Under
``--simulate`` every node of the spec is qualified through the simulated tools. Without
``--tests`` every test that applies runs (schedule.py ``default_groups``). Before anything
starts, the schedule and its estimated duration (timing.py) are said, and a schedule that
cannot fit the budget is refused unless told to run what fits.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ClusterShell.NodeSet import NodeSetParseError

from ...checks.core.finding import Action, Finding, Status
from ...checks.core.levels import Level
from ...checks.profiles.profile import Profile, UnknownProfileError, load_profile
from ...checks.qualify.active import ACTIVE_TESTS
from ...checks.qualify.judge import FleetKey, Judged, StragglerRule
from ...reports.model.cluster import ClusterFinding, ClusterReport, fold
from ...reports.model.qualify import QualifyReport, node_summary
from ..base.errors import CollectError, UsageError
from ..cluster.nodes import resolve_nodes
from ..model.nodeset import expand
from ..model.qualify import CROSS_TESTS
from ..read.sources import become_subreaper
from ..run.session import site_profile
from ..settings.config import Config, seconds_problem
from ..sim.tools import simulated_cluster
from ..slurm.scontrol import Scontrol
from . import baseline, medians
from .cross import Cross
from .drain import drain_nodes
from .inventory import Inventory
from .launch import VIAS, GroupRunner, ToolRunner, command_runner, group_runner
from .logs import judge_logs
from .plan import NODE_TESTS
from .run import QualifyOptions, qualify
from .schedule import GROUPS, default_groups
from .timing import Schedule, duration, estimate

TEST_GROUPS = GROUPS


@dataclass
class Request:
    nodes: str | None = None
    via: str | None = None
    tests: str | None = None
    level: str | None = None
    budget: float | None = None
    profile: str | None = None
    simulate: str | None = None
    from_logs: tuple[str, ...] = ()
    baseline: Path | None = None
    drain: bool = False
    seed: int = 0
    # Kill what a finished tool left behind, even setsid'd (agent/read/sources.py
    # become_subreaper): for the CLI process only, never a host process such as pytest's.
    adopt_orphans: bool = False
    fit_budget: bool = False  # drop the groups of tests that do not fit instead of refusing
    say: Callable[[str], None] | None = None  # where the schedule is said before it starts
    medians: Path | None = None  # the fleet's medians file (default qualify.medians_file)
    clock: Callable[[], float] = time.time  # when the medians were measured


@cache
def _version() -> str:
    """The installed version, read once: every node's summary carries it, and each read of
    the package metadata costs about a millisecond (1.5 s of 1,024 nodes' report)."""
    try:
        return version("clusterdiag")
    except PackageNotFoundError:
        return "0"


def load_site_profile(config: Config, arg: str) -> Profile:
    """A built-in or site profile by name, or a site profile file, through the validated
    loader every command uses (agent/settings/site_profiles.py: ``extends``, types, did-you-mean);
    a bad one is a one-line ConfigError/UsageError (exit 2)."""
    try:
        return load_profile(site_profile(config, arg))
    except UnknownProfileError as exc:
        raise UsageError(f"--profile {arg}: {exc}") from None


def _groups(arg: str) -> tuple[str, ...]:
    """The test groups ``--tests`` asks for."""
    groups = [t.strip() for t in arg.split(",") if t.strip()]
    unknown = [g for g in groups if g not in TEST_GROUPS]
    if unknown or not groups:
        raise UsageError(f"--tests: unknown test group {(unknown or [arg])[0]!r} "
                         f"(choose from {', '.join(TEST_GROUPS)})")
    return tuple(g for g in TEST_GROUPS if g in groups)


def _tests(groups: Sequence[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The node tests and the tests between nodes of ``groups``."""
    node = frozenset(NODE_TESTS) if "node" in groups else frozenset()
    return node, frozenset(CROSS_TESTS) & set(groups)


def _budget(request: Request, settings: Mapping[str, Any]) -> float:
    budget = float(request.budget if request.budget is not None else settings["budget_s"])
    if (problem := seconds_problem(budget, 1.0)) is not None:
        where = "--budget" if request.budget is not None else "qualify.budget_s"
        raise UsageError(f"{where} {budget:g}: {problem}")
    return budget


def plan(request: Request, nodes: list[str], profiles: Mapping[str, Profile],
         racks: Mapping[str, list[str]], level: Level, settings: Mapping[str, Any],
         budget: float, via: str, notes: list[str]) -> tuple[tuple[str, ...], Schedule]:
    """The test groups to run and their schedule, said before anything starts; a schedule
    over ``budget`` is refused (exit 2), or with ``--fit-budget`` trimmed of the groups that
    do not fit, last first in the order of TEST_GROUPS, with a note saying what was left out."""
    groups = _groups(request.tests) if request.tests else default_groups(
        nodes, profiles, racks)
    schedule = estimate(nodes, profiles, groups, level, settings, via, racks)
    say = request.say or (lambda line: None)
    for line in schedule.lines(budget):
        say(line)
    if schedule.seconds <= budget:
        return groups, schedule
    over = (f"the schedule is estimated at {duration(schedule.seconds)}, over the budget of "
            f"{duration(budget)}")
    if not request.fit_budget:
        raise UsageError(f"qualify: {over}: raise --budget (or qualify.budget_s), narrow "
                         "--tests, or add --fit-budget to run what fits")
    fitted, dropped = schedule.fit(budget)
    if not fitted.stages:
        raise UsageError(f"qualify: {over}, and not even the node tests fit: raise --budget "
                         "(or qualify.budget_s) or qualify.parallel_nodes")
    left_out = ", ".join(f"{g} ({duration(schedule.group_seconds(g))})" for g in dropped)
    note = (f"--fit-budget: {over}; left out {left_out}, and ran "
            f"{', '.join(fitted.groups)} (about {duration(fitted.seconds)})")
    notes.append(note)
    say(f"qualify: {note}")
    return tuple(g for g in groups if g not in dropped), fitted


def _racks(config: Config, nodes: list[str]) -> dict[str, list[str]]:
    """``cluster.racks`` (rack name -> node set of its trays), limited to ``nodes``."""
    wanted = set(nodes)
    out = {}
    for rack, members in (config.section("cluster").get("racks") or {}).items():
        try:
            out[str(rack)] = [n for n in expand(str(members)) if n in wanted]
        except NodeSetParseError as exc:
            raise UsageError(f"cluster.racks {rack}: {exc}") from None
    return out


def _cluster(findings: dict[str, list[Any]], profiles: dict[str, str], gpus: dict[str, int],
             via: str) -> ClusterReport:
    summaries = [node_summary(node, profiles.get(node, ""), _version(), gpus.get(node, 0),
                              own) for node, own in findings.items()]
    return ClusterReport(summaries, [], _version(), via)


_MAX_INVENTORY_NOTES = 20


def inventory_notes(inventories: Mapping[str, Inventory]) -> list[str]:
    """What the inventories say of how tests ran (a rail in host memory, a port left out),
    each note once with the nodes it holds for, folded; at most ``_MAX_INVENTORY_NOTES``."""
    by_note: dict[str, list[str]] = {}
    for node, inv in inventories.items():
        for note in inv.notes:
            by_note.setdefault(note, []).append(node)
    out = [f"{fold(nodes)}: {note}" for note, nodes in sorted(by_note.items())]
    if len(out) > _MAX_INVENTORY_NOTES:
        more = len(out) - _MAX_INVENTORY_NOTES
        out = [*out[:_MAX_INVENTORY_NOTES], f"... and {more} more notes on how the tests ran"]
    return out


def _rule(config: Config) -> StragglerRule:
    return StragglerRule.from_config(config.section("qualify"))


def from_logs(request: Request, config: Config) -> QualifyReport:
    profile = load_site_profile(config, request.profile) if request.profile else None
    result = judge_logs([Path(p) for p in request.from_logs], profile, _rule(config))
    names = {node: profile.name if profile else "" for node in result.judgement.findings}
    cluster = _cluster(result.judgement.findings, names, {}, "files")
    cluster.findings.extend(ClusterFinding(f) for f in result.judgement.cluster)
    return QualifyReport(cluster, "logs", ["logs"], request.level or "quick", 0.0,
                         result.judgement.figures, result.runs, result.judgement.findings,
                         notes=result.notes, cross=result.cross)


def _nodes_and_via(request: Request) -> tuple[list[str], str]:
    inside = bool(os.environ.get("SLURM_JOB_ID")) and request.nodes is None
    nodes = resolve_nodes(request.nodes)
    via = request.via or ("srun" if inside else "ssh" if nodes else "local")
    if via not in VIAS:
        raise UsageError(f"--via {via}: choose from {', '.join(VIAS)}")
    if nodes is None:
        nodes = [socket.gethostname()]
    if via == "local" and len(nodes) > 1:
        raise UsageError("--via local qualifies this node only; use srun or ssh for --nodes")
    return nodes, via


def run(request: Request, config: Config) -> QualifyReport:
    """The qualification, its report, the baseline and the drains."""
    if request.from_logs:
        if request.medians is not None:
            raise UsageError("--medians: saved logs are not recorded as the fleet's medians "
                             "(when they were measured, and on which nodes, is not known)")
        return from_logs(request, config)
    if request.adopt_orphans:
        become_subreaper()
    notes: list[str] = []
    settings = dict(config.section("qualify"))
    level = Level(request.level or config.data["level"])
    budget = _budget(request, settings)
    kept = _medians_kept(request, settings)
    if request.tests is not None:
        _groups(request.tests)  # a bad --tests is said before anything else is asked
    if request.simulate is not None:
        sims, runner = simulated_cluster(request.simulate, request.seed)
        nodes, via = sorted(sims), "local"
        given = load_site_profile(config, request.profile) if request.profile else None
        profiles = {n: given or s.profile for n, s in sims.items()}
        tool_runner: ToolRunner = runner
        group: GroupRunner = runner.group
        racks = _racks(config, nodes) or {r: sorted(n for n, s in sims.items() if s.rack == r)
                                          for r in {s.rack for s in sims.values() if s.rack}}
    else:
        nodes, via = _nodes_and_via(request)
        name = request.profile or config.data["profile"]
        if name == "auto":
            name = "generic"
            notes.append("no --profile: judged against peers only (no expected figures)")
        profile = load_site_profile(config, name)
        profiles = {n: profile for n in nodes}
        tool_runner = command_runner(via)
        group = group_runner(via, str(settings.get("srun_mpi", "auto")))
        racks = _racks(config, nodes)
    # A simulated cluster stands for one qualified from inside a Slurm allocation.
    groups, _ = plan(request, nodes, profiles, racks, level, settings, budget,
                     "srun" if request.simulate is not None else via, notes)
    tests, cross_tests = _tests(groups)
    options = QualifyOptions(tests, level, budget, settings)
    outcome = qualify(nodes, tool_runner, profiles, options)
    notes += inventory_notes(outcome.inventories)
    if request.tests is None and not any(i.rails for i in outcome.inventories.values()):
        # No node has a compute rail: the tests that need one do not apply after all.
        tests, cross_tests = (frozenset(t for t in ts if not ACTIVE_TESTS[t].needs_rails)
                              for ts in (tests, cross_tests))
    cross = None
    if cross_tests:
        excluded = {n for n, own in outcome.judgement.findings.items()
                    if any(f.status in (Status.FAIL, Status.ERROR) for f in own)}
        options = QualifyOptions(cross_tests, level, max(budget - outcome.seconds, 1.0),
                                 settings)
        cross = Cross(nodes, outcome.inventories, profiles, tool_runner, group, options,
                      racks).run(cross_tests, excluded)
        notes += cross.notes
        for node, own in cross.findings.items():
            outcome.judgement.findings.setdefault(node, []).extend(own)
    if cross is not None and not tests and not any(
            r.run.error is None and r.run.skipped is None for r in cross.runs):
        why = sorted({r.run.error or r.run.skipped or "" for r in cross.runs} - {""})
        raise CollectError("qualify: no test between nodes could run: "
                           + "; ".join(why[:2] or cross.notes[:2] or ["nothing to run"]))
    if tests and not outcome.anything_ran:
        missing = sorted({r.skipped or r.error or "" for r in outcome.runs} - {""})
        problems = sorted({p for inv in outcome.inventories.values() for p in inv.problems})
        raise CollectError("qualify: no test could run on any node: "
                           + "; ".join(missing[:3] + problems[:2] or ["no GPUs found"]))
    names = {n: p.name for n, p in profiles.items()}
    gpus = {n: len(inv.gpus) for n, inv in outcome.inventories.items()}
    for node in nodes:
        own = outcome.judgement.findings.setdefault(node, [])
        inv = outcome.inventories.get(node)
        if not own and inv is not None:
            own.append(Finding(Status.ERROR, "node", "could not list the node's GPUs",
                               "; ".join(inv.problems) or "no GPUs", None, Action.INVESTIGATE,
                               "qualify.inventory"))
    if tests and (said := record_medians(request, config, outcome.judgement.figures, kept)):
        notes.append(said)
    saved = baseline.load(request.baseline) if request.baseline is not None else None
    moved = baseline.drift(saved, outcome.judgement.figures) if saved is not None else []
    for node, own in baseline.drift_findings(moved, float(settings.get("drift_pct", 10.0))
                                             ).items():
        outcome.judgement.findings.setdefault(node, []).extend(own)
    cluster = _cluster(outcome.judgement.findings, names, gpus, via)
    cluster.findings.extend(ClusterFinding(f) for f in outcome.judgement.cluster)
    report = QualifyReport(cluster, "run", sorted(tests | cross_tests), level,
                           outcome.seconds + (cross.seconds if cross else 0.0),
                           outcome.judgement.figures, outcome.runs, outcome.judgement.findings,
                           outcome.repeated, notes=notes)
    if cross is not None:
        cluster.findings.extend(ClusterFinding(f) for f in cross.cluster)
        report.cross = cross.graded
        report.scaling = cross.scaling
        report.schedule = cross.schedule()
        report.fail_pct = options.rule.fail_pct
    report.drift = moved
    if request.baseline is not None and saved is None:
        baseline.save(request.baseline, report.figures, cluster.generated_at)
        report.notes.append(f"saved {len(report.figures)} figures as the baseline "
                            f"{request.baseline}")
    if request.drain:
        report.drained = drain(report, config)
    return report


def _medians_path(request: Request, settings: Mapping[str, Any]) -> Path | None:
    given = request.medians or settings.get("medians_file")
    return None if given is None else Path(given)


def _medians_kept(request: Request, settings: Mapping[str, Any]
                  ) -> dict[FleetKey, medians.Median]:
    """What the medians file holds already, read before anything runs: a file there that is
    not a medians file is refused now (exit 2), not after an hour of tests."""
    path = _medians_path(request, settings)
    if path is None or not path.exists():
        return {}
    try:
        return medians.read(path)
    except medians.MediansError as exc:
        raise UsageError(f"medians file {exc}") from None


def record_medians(request: Request, config: Config, judged: list[Judged],
                   kept: Mapping[FleetKey, medians.Median]) -> str | None:
    """The run's medians merged into the medians file, and the note that says so. A file
    that cannot be written loses the run nothing: the note (and a line on stderr) says
    why, and the report stands."""
    settings = config.section("qualify")
    path = _medians_path(request, settings)
    if path is None:
        return None
    new = medians.from_run(judged, int(settings["min_peers"]), request.clock())
    try:
        medians.write(path, medians.merge(kept, new))
    except OSError as exc:
        said = f"could not record the fleet medians in {path}: {exc.strerror or exc}"
        (request.say or (lambda line: None))(f"qualify: {said}")
        return said
    return (f"recorded {len(new)} fleet medians (test groups measured on at least "
            f"{settings['min_peers']} nodes) in {path}")


def drain(report: QualifyReport, config: Config) -> list[dict[str, Any]]:
    bad = set(report.bad_nodes)
    findings = {n: [f for f in fs if f.status is Status.FAIL]
                for n, fs in report.findings.items() if n in bad}
    scontrol = Scontrol(config.section("prolog").get("scontrol"))
    return [d.to_dict() for d in drain_nodes(findings, scontrol)]
