"""``clusterdiag validate``: the validation a node's open incident calls for, run now.

The incident names its check; the check's declaration (checks/core/validation.py) says
how the node earns its way back. Every validation first runs that check on the node: a
fault still there fails it with the check's figure. A ``recheck`` then asks for the
hold-down since the incident (a service that crash-loops passes between restarts); a
``qualify`` runs the named node tests through qualify's own machinery (run.py) on this
node and fails with the test's figure. What could not run (a tool missing, a check that
errs, our own trouble, the budget) is ``error``: exit 3, the node stays drained, and it
is never counted as the node's fault.

The lifecycle (agent/health/lifecycle.py) moves drained -> validating before anything
runs, and validating -> healthy or back to drained after, saved each time, so a
validation killed half-way is seen as one on the next run. ``release`` lets a node held
for repair back into validation.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...checks.core import index
from ...checks.core.finding import Finding, Status
from ...checks.core.levels import Level
from ...checks.core.validation import QUALIFY_PREFIX, Kind, Validation
from ...checks.profiles.profile import Profile
from ...checks.qualify.judge import FleetKey, number
from ..base.errors import CollectError, ExitCode, UsageError
from ..health import lock, store
from ..health.incident import hold_down_s, validation_for
from ..health.lifecycle import Basis, Health, Incident, Outcome, Reading, Result, State
from ..run import session
from ..run.runner import run_node
from ..settings.config import Config
from . import medians
from .command import load_site_profile
from .launch import ToolRunner, command_runner
from .run import QualifyOptions, qualify

EXIT: Mapping[Result, ExitCode] = {Result.PASSED: ExitCode.READY,
                                   Result.FAILED: ExitCode.FAIL,
                                   Result.WAITING: ExitCode.FAIL,
                                   Result.ERROR: ExitCode.COLLECT}


@dataclass
class Request:
    state_dir: Path
    node: str | None = None
    simulate: str | None = None
    seed: int = 0
    release: bool = False
    config_path: Path | None = None
    clock: Callable[[], float] = time.time
    root: str | None = None  # the node's files under this root (``--root``)
    lock_fd: int | None = None  # the lock the health check took for this validation


@dataclass
class Answer:
    """What ``validate`` did: the node's lifecycle after it, and the outcome (None when
    there was nothing to validate)."""

    health: Health
    outcome: Outcome | None
    validation: Validation | None
    message: str

    @property
    def exit_code(self) -> ExitCode:
        if self.outcome is None:
            return ExitCode.FAIL if self.health.state is State.HELD else ExitCode.READY
        return EXIT[self.outcome.result]


def validate(request: Request, config: Config) -> Answer:
    """Validate the node's open incident, saving the lifecycle before and after, under the
    validation lock (agent/health/lock.py) for the whole run: taken here, or the one the
    health check took and handed down (``lock_fd``). A node with nothing to validate
    answers without it, so a look at a healthy node never makes the prolog refuse a job.
    A lock another validation holds is our trouble (CollectError): the lifecycle is not
    touched, and the validation under way decides."""
    health = store.load(request.state_dir)
    if request.lock_fd is None and not request.release and health.state in (State.HEALTHY,
                                                                             State.HELD):
        return _validate(request, config, health)
    fd = _hold(request)
    try:
        return _validate(request, config, store.load(request.state_dir))
    finally:
        os.close(fd)


def _hold(request: Request) -> int:
    where = request.state_dir
    try:
        fd = lock.take(where) if request.lock_fd is None else lock.adopt(where,
                                                                          request.lock_fd)
    except OSError as exc:
        raise CollectError(f"validation lock {lock.path(where)}: "
                           f"{exc.strerror or exc}") from None
    if fd is None:
        raise CollectError(f"a validation is already running on this node "
                           f"({lock.path(where)} is held)")
    return fd


def _validate(request: Request, config: Config, health: Health) -> Answer:
    now = request.clock()
    if request.release:
        if health.state is not State.HELD:
            raise UsageError(f"--release: the node is {health.state.value}, not held for "
                             "repair")
        health.start(now)
    elif health.state is State.HEALTHY:
        return Answer(health, None, None, "healthy: no open incident to validate")
    elif health.state is State.HELD:
        assert health.open is not None
        return Answer(health, None, None, f"held for repair ({health.open.check} "
                      f"{health.open.component}): repair it, then validate --release")
    elif health.state is State.DRAINED:
        health.start(now)
    incident = health.open
    assert incident is not None  # validating: store.from_dict refuses one without
    _save(request.state_dir, health)
    validation = validation_for(incident.check)
    try:
        outcome = _run(request, config, incident, validation)
    except CollectError as exc:
        outcome = Outcome(Result.ERROR, str(exc)[:store.MAX_TEXT], request.clock())
    health.finish(outcome)
    _save(request.state_dir, health)
    return Answer(health, outcome, validation, _say(incident, validation, outcome))


def _save(state_dir: Path, health: Health) -> None:
    try:
        store.save(state_dir, health)
    except OSError as exc:
        raise CollectError(f"state directory {state_dir}: {exc.strerror or exc}") from None


def _say(incident: Incident, validation: Validation, outcome: Outcome) -> str:
    what = f"{incident.check} {incident.component} ({validation.kind.value})"
    return f"{outcome.result.value}: {what}: {outcome.detail}"


def _run(request: Request, config: Config, incident: Incident,
         validation: Validation) -> Outcome:
    if not incident.check.startswith(QUALIFY_PREFIX):
        found = _recheck(request, config, incident.check)
        if found is not None:
            return Outcome(*found[:2], request.clock(), found[2])
    now = request.clock()
    if validation.kind is Kind.RECHECK:
        hold = hold_down_s(validation, config.section("health")["hold_down_s"])
        left = incident.at + hold - now
        if left > 0:
            return Outcome(Result.WAITING, f"the check passes; its hold-down of "
                           f"{hold:g} s ends in {left:.0f} s", now)
        return Outcome(Result.PASSED, "the check passes, after its hold-down", now)
    result, detail, reading = _qualify(request, config, validation.tests)
    return Outcome(result, detail, request.clock(), reading)


Verdict = tuple[Result, str, Reading | None]  # the result, its detail, a failure's figure


def _recheck(request: Request, config: Config, check_id: str) -> Verdict | None:
    """The check run on the node now: None when it passes, else the result and why."""
    entry = index.known().get(check_id)
    if entry is None:
        return Result.ERROR, f"{check_id} is not a check of this version's catalog", None
    level = Level.FULL if entry.rate or entry.active else Level.QUICK
    env = session.source_env(config, request.root, None, request.simulate, request.node)
    options = session.run_options(config, level.value, None, None, check_id)
    findings = [f for f in run_node(env, config, options).findings if f.check == check_id]
    return _verdict(findings, check_id)


def _verdict(findings: list[Finding], what: str) -> Verdict | None:
    """Fails first (the node's fault, with the figure), then what could not be judged."""
    for status, result in ((Status.FAIL, Result.FAILED), (Status.ERROR, Result.ERROR),
                           (Status.SKIP, Result.ERROR)):
        hit = next((f for f in findings if f.status is status), None)
        if hit is not None:
            return result, _figure(hit), _reading(hit) if result is Result.FAILED else None
    if not findings:
        return Result.ERROR, f"{what}: nothing was judged", None
    return None


def _figure(finding: Finding) -> str:
    """The finding in one bounded line with its figure: what it observed against what was
    expected (``observed {"value":43004.0}; expected {"peers_median":53567.5}``)."""
    brief = finding.brief()
    parts = [f"{finding.check} {finding.component} {brief}"]
    if finding.observed is not None and brief != str(finding.observed).strip():
        parts.append(f"observed {_compact(finding.observed)}")
    if finding.expected is not None:
        parts.append(f"expected {_compact(finding.expected)}")
    return "; ".join(parts)[:store.MAX_TEXT]


def _compact(value: Any) -> str:
    if isinstance(value, dict) and "value" in value:  # qualify's: the figure, not its runs
        value = value["value"]
    return json.dumps(value, separators=(",", ":"), default=str)


def _reading(finding: Finding) -> Reading | None:
    """A qualify figure's finding as a Reading (checks/qualify/judge.py, _figure_finding():
    observed ``{"value", "runs"}``, expected ``{"peers_median", "unit", "expected_value",
    "floor"}`` and ``fleet_median`` when judged against the fleet's medians too), against
    what convicted it: the profile's floor when the figure is below it (grade()'s first
    rule), else the higher of the peers' and the fleet's medians (the worse verdict
    stands, and it is the one the figure falls furthest below), else the profile's
    expected figure. None for any other finding (its text is short: ``17/18``), and for
    one whose words health.json would not keep."""
    observed, expected = finding.observed, finding.expected
    if not isinstance(observed, dict) or not isinstance(expected, dict) \
            or max(len(finding.check), len(finding.component)) > store.MAX_WORD:
        return None
    value, floor = number(observed.get("value")), number(expected.get("floor"))
    medians = [(m, b) for b, m in ((Basis.PEERS, number(expected.get("peers_median"))),
                                   (Basis.FLEET, number(expected.get("fleet_median"))))
               if m is not None]
    median, by = max(medians, key=lambda m: m[0]) if medians else (None, Basis.PEERS)
    against = ((Basis.FLOOR, floor if value is not None and floor is not None
                and value < floor else None),
               (by, median),
               (Basis.EXPECTED, number(expected.get("expected_value"))))
    basis, wanted = next(((b, v) for b, v in against if v is not None), (None, None))
    if value is None or basis is None or wanted is None:
        return None
    try:
        return Reading(finding.check, finding.component, finding.message[:store.MAX_TEXT],
                       value, wanted, str(expected.get("unit")), basis)
    except ValueError:  # a unit or figure Reading refuses: the text alone says it
        return None


def _qualify(request: Request, config: Config, tests: tuple[str, ...]) -> Verdict:
    """The node tests through qualify's machinery, on this node only, judged against the
    profile's expected figures."""
    settings: dict[str, Any] = dict(config.section("qualify"))
    runner: ToolRunner
    if request.simulate is not None:
        from ..sim.tools import simulated_cluster  # the simulator only under --simulate

        sims, sim_runner = simulated_cluster(request.simulate, request.seed)
        node = request.node or next(iter(sims))
        if node not in sims:
            raise UsageError(f"--node {node}: not a node of --simulate {request.simulate}")
        profile: Profile = sims[node].profile
        runner = sim_runner
    else:
        node = session.node_name(config, request.node)
        name = config.data["profile"]
        profile = load_site_profile(config, "generic" if name == "auto" else name)
        runner = command_runner("local")
    fleet, said = _fleet(config, profile.name, tests, request.clock())
    options = QualifyOptions(frozenset(tests), Level(config.data["level"]),
                             float(settings["budget_s"]), settings, fleet)
    outcome = qualify([node], runner, {node: profile}, options)
    if not outcome.anything_ran:
        why = sorted({r.skipped or r.error or "" for r in outcome.runs} - {""})
        return Result.ERROR, _with(("; ".join(why[:2]) or "no test could run"), said), None
    own = outcome.judgement.findings.get(node, [])
    found = _verdict(own, ", ".join(tests))
    if found is not None:
        return found[0], _with(found[1], said), found[2]
    return Result.PASSED, _with(f"{', '.join(tests)} passed", said), None


def _with(detail: str, said: str) -> str:
    """The outcome's detail and what it says of the fleet's medians, in one bounded line;
    the figure first, so a bound cuts the note, never the evidence."""
    return (f"{detail}; {said}" if said else detail)[:store.MAX_TEXT]


def _fleet(config: Config, profile: str, tests: tuple[str, ...], now: float
           ) -> tuple[dict[FleetKey, float], str]:
    """The fleet's recent medians of the profile's tests (``qualify.medians_file``), and
    what to say of them. A file missing, unreadable, hostile or stale is never the node's
    fault: it is judged as without one (its floors, its own GPUs), and the note says why."""
    where = config.section("qualify")["medians_file"]
    if where is None:
        return {}, ""
    try:
        saved = medians.read(Path(where))
    except medians.MediansError as exc:
        return {}, f"the fleet's medians not used: {exc}"
    max_age = float(config.section("health")["medians_max_age_s"])
    fresh, stale = medians.recent(saved, profile, tests, now, max_age)
    if fresh:
        return fresh, f"judged against the fleet's medians of {profile} too"
    if stale:
        oldest = max(now - m.at for m in stale)
        return {}, (f"the fleet's medians not used: those of {profile} are not recent "
                    f"({oldest / 86400:.0f} days old, over health.medians_max_age_s: "
                    f"{max_age / 86400:g} days)")
    return {}, f"the fleet's medians not used: {where} has none for {profile} " \
        f"({', '.join(tests)})"
