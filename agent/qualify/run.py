"""A node qualification: every node's tests (nodes in parallel, one test at a time on a
node), the judgement, one repeat of every suspect test, and the final judgement.

A test that cannot start because its tool is missing is a ``skip`` with the install hint;
a test past its deadline was killed with its process tree and is a hang of its node; a run
where no test could run at all is clusterdiag's failure to collect (exit 3), not a verdict.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from ...checks.core.levels import Level
from ...checks.profiles.profile import Profile
from ...checks.qualify.active import figures_for
from ...checks.qualify.judge import (
    FleetKey,
    Judgement,
    StragglerRule,
    expectations,
    judge,
    needs_repeat,
    suspects,
)
from ..model.qualify import Evidence, ToolRun
from ..read.sources import CommandResult
from . import parsers
from .inventory import Inventory, take
from .launch import ToolRunner, cannot_start, missing
from .parsers import gpuburn
from .plan import DEADLINES, Step, node_steps

_HUNG_EXITS = (124, 137)  # coreutils timeout on the node: TERM, then KILL


@dataclass
class QualifyOptions:
    tests: frozenset[str]
    level: Level = Level.QUICK
    budget_s: float = 3600.0
    settings: Mapping[str, Any] = field(default_factory=dict)  # config "qualify" section
    # The fleet's medians by peer group (medians.py), judged against besides the run's own.
    fleet: Mapping[FleetKey, float] = field(default_factory=dict)

    @property
    def rule(self) -> StragglerRule:
        return StragglerRule.from_config(self.settings)


@dataclass
class Outcome:
    runs: list[ToolRun]
    judgement: Judgement
    inventories: dict[str, Inventory]
    seconds: float
    repeated: list[tuple[str, str]]

    @property
    def anything_ran(self) -> bool:
        return any((r.skipped is None and r.error is None) or r.hung for r in self.runs)


# What an inventory probe is given once the budget is spent: enough to fail at once, so
# the probe says why, and the run's steps then say the budget is spent.
_SPENT_S = 0.1


def inventory(node: str, runner: ToolRunner, settings: Mapping[str, Any],
              tests: frozenset[str], deadline: float | None = None) -> Inventory:
    """The node's inventory, each probe within its own deadline and what is left of the
    qualification's budget (``deadline``, monotonic): a budget of seconds is never spent
    waiting on a probe that hangs."""
    timeout = float((settings.get("deadline_s") or {}).get("inventory", DEADLINES["inventory"]))
    if deadline is None:
        return take(node, runner, settings, tests, timeout)

    def within_budget(node: str, argv: list[str], env: Mapping[str, str],
                      timeout_s: float) -> CommandResult:
        left = deadline - time.monotonic()
        return runner(node, argv, env, max(_SPENT_S, min(timeout_s, left)))

    return take(node, within_budget, settings, tests, timeout)


def assign_tests(run: ToolRun, invocation: str) -> None:
    """Each figure under the test it belongs to (checks/qualify/active.py): a tool that
    serves several tests in one run (nvbandwidth) names its figures by what it measured."""
    if run.tool != "nvbandwidth":
        return
    wanted = figures_for(invocation, {f.test for f in run.figures})
    unused = sorted({f.test for f in run.figures} - set(wanted))
    run.figures = [replace(f, test=wanted[f.test]) for f in run.figures if f.test in wanted]
    if unused:
        run.notes.append(f"testcases read but not judged: {', '.join(unused)}")


_TAIL_CHARS = 600  # of stderr kept in a finding: srun's or the loader's reason fits


def result_run(step: Step, node: str, result: CommandResult, seconds: float,
               limit_s: float | None = None) -> ToolRun:
    """What the run says; ``limit_s`` is the time it was given, when the budget left less
    than its own deadline: stopped there, it is our deadline (an error), not a hang."""
    run = ToolRun(step.tool, node, step.test, " ".join(step.argv), result.returncode,
                  seconds=seconds)
    program = step.argv[0].rsplit("/", 1)[-1]
    if missing(result):
        run.returncode = None
        run.skipped = f"{program} not found: {step.install or 'install it'}"
        return run
    if (cannot := cannot_start(result)) is not None:  # its installation, not the node
        run.evidence.append(Evidence("setup", "node",
                                     f"{program} is installed but cannot start: {cannot}"))
        return run
    if result.error is not None or result.returncode in _HUNG_EXITS:
        run.hung = result.error is None or "no answer within" in result.error
        run.error = result.error or f"killed at its deadline on the node ({step.deadline_s:g} s)"
        if not run.hung:
            return run
        if limit_s is not None and limit_s < step.deadline_s:
            run.hung = False
            run.error = (f"stopped after {limit_s:.0f} s, where the qualification budget "
                         f"(--budget) ran out, before its own {step.deadline_s:g} s deadline")
            return run
        run.error = f"no answer within {step.deadline_s:g} s; its process tree was killed"
        return run
    if result.returncode not in (0, None):  # the launcher's or tool's own words, bounded
        tail = (result.stderr.strip() or result.stdout.strip())[-_TAIL_CHARS:]
        if tail:
            run.notes.append(f"exit {result.returncode}; its last lines: {tail}")
    if result.stray:
        run.notes.append(f"{result.stray} process(es) it left running after it exited were "
                         "killed")
    parsing = time.monotonic()
    text = result.stdout + "\n" + result.stderr
    parsers.parse(step.tool, text, run)
    if step.tool == "gpu_burn":
        gpuburn.as_asked(text, step.argv, run)
    assign_tests(run, step.test)
    run.parse_s = time.monotonic() - parsing
    for figure in run.figures:
        if step.component != "node" and figure.test == "nic":
            figure.component = step.component
    return run


def run_step(step: Step, node: str, runner: ToolRunner, deadline: float,
             server_node: str | None = None) -> ToolRun:
    """The step on ``node`` (its server half, if any, on ``server_node``, by default the
    same node)."""
    if step.error is not None:
        return ToolRun(step.tool, node, step.test, " ".join(step.argv), error=step.error)
    if step.missing:
        return _fall_back(step, node, runner, deadline, ToolRun(
            step.tool, node, step.test, " ".join(step.argv),
            skipped=f"{step.argv[0].rsplit('/', 1)[-1]} not found: {step.install}"))
    left = min(step.deadline_s, deadline - time.monotonic())
    if left < 1.0:
        return ToolRun(step.tool, node, step.test, " ".join(step.argv),
                       error="no time left in the qualification budget (--budget)")
    env = dict(step.env)
    started = time.monotonic()
    if step.server_argv is None:
        result = runner(node, list(step.argv), env, left)
    else:
        server: list[CommandResult] = []
        thread = threading.Thread(target=lambda: server.append(
            runner(server_node or node, list(step.server_argv or ()), env, left)), daemon=True)
        thread.start()
        result = _client(step, node, runner, env, left, thread)
        thread.join(left + 15)
        if server and missing(server[0]):
            result = server[0]
    return _fall_back(step, node, runner, deadline,
                      result_run(step, node, result, time.monotonic() - started, left))


def _fall_back(step: Step, node: str, runner: ToolRunner, deadline: float, run: ToolRun
               ) -> ToolRun:
    """``run``, or where its program is not installed, the step's fallback's run with why."""
    if run.skipped is None or step.fallback is None:
        return run
    other = run_step(step.fallback, node, runner, deadline)
    if other.skipped is None:
        other.notes.append(run.skipped)
        return other
    other.skipped = f"{run.skipped}; {other.skipped}"
    return other


CONNECT_S = 15.0  # how long a client keeps trying to reach its server
# The client's pause before each new attempt: short at first, since a server is usually a
# moment from listening, then doubling up to the most, so a server slow to open its device
# is not asked several times a second for 15 s.
_RETRY_FIRST_S = 0.05
_RETRY_MOST_S = 0.5


def _client(step: Step, node: str, runner: ToolRunner, env: Mapping[str, str], left: float,
            server: threading.Thread) -> CommandResult:
    """The client half of a server/client test (perftest), started again while it could not
    reach its server and the server still runs: the server listens only once it has opened
    its device (write_bw.c), a moment that varies with the node, and perftest's client
    does not retry (perftest_communication.c ethernet_client_connect). After CONNECT_S the
    last attempt's output stands, which the parser reads as a set-up error, not the rail's."""
    started = time.monotonic()
    until = started + min(CONNECT_S, left / 2)
    pause = _RETRY_FIRST_S
    while True:
        result = runner(node, list(step.argv), env, max(1.0, left - (time.monotonic() - started)))
        refused = result.returncode not in (0, None) and "Couldn't connect to" in (
            result.stdout + result.stderr)
        if not refused or not server.is_alive() or time.monotonic() + pause >= until:
            return result
        time.sleep(pause)
        pause = min(2 * pause, _RETRY_MOST_S)


def _merge_repeat(first: ToolRun, again: ToolRun) -> ToolRun:
    """The repeat's figures become second values of the first run's figures."""
    if again.error is not None or again.hung:
        first.notes.append(f"the repeat could not run: {again.error}")
        return first
    for figure in first.figures:
        twin = next((f for f in again.figures if f.test == figure.test
                     and f.component == figure.component), None)
        if twin is not None:
            figure.values.append(twin.value)
    first.evidence.extend(e for e in again.evidence if e.kind == "fail")
    return first


def qualify(nodes: list[str], runner: ToolRunner, profiles: Mapping[str, Profile],
            options: QualifyOptions) -> Outcome:
    started = time.monotonic()
    deadline = started + options.budget_s
    workers = max(1, min(len(nodes), int(options.settings.get("parallel_nodes", 256))))
    inventories: dict[str, Inventory] = {}
    plans: dict[str, list[Step]] = {}

    def first_pass(node: str) -> list[ToolRun]:
        inv = inventory(node, runner, options.settings, options.tests, deadline)
        inventories[node] = inv
        plans[node] = node_steps(inv, options.level, options.settings, options.tests,
                                 profiles[node].gpu_burn_doubles)
        return [run_step(step, node, runner, deadline) for step in plans[node]]

    with ThreadPoolExecutor(workers) as pool:
        runs = [r for batch in pool.map(first_pass, nodes) for r in batch]
    names = {n: profiles[n].name for n in nodes}
    expect = {p.name: expectations(p) for p in profiles.values()}
    judgement = judge(runs, names, expect, options.rule, fleet=options.fleet)
    repeated: list[tuple[str, str]] = []
    if options.settings.get("repeat", True):
        wanted = suspects(judgement.figures)
        todo = [(i, run) for i, run in enumerate(runs) if needs_repeat(run, wanted)]

        by_node: dict[str, list[tuple[int, ToolRun]]] = {}
        for item in todo:
            by_node.setdefault(item[1].node, []).append(item)

        def again(items: list[tuple[int, ToolRun]]) -> list[tuple[int, ToolRun]]:
            out = []
            for index, run in items:  # one test at a time on a node
                step = next(s for s in _with_fallbacks(plans[run.node])
                            if s.test == run.test and " ".join(s.argv) == run.source)
                out.append((index, _merge_repeat(run, run_step(step, run.node, runner,
                                                               deadline))))
            return out

        with ThreadPoolExecutor(workers) as pool:
            for batch in pool.map(again, by_node.values()):
                for index, run in batch:
                    runs[index] = run
                    repeated.append((run.node, run.test))
        if todo:
            judgement = judge(runs, names, expect, options.rule, fleet=options.fleet)
    return Outcome(runs, judgement, inventories, time.monotonic() - started, repeated)


def _with_fallbacks(steps: list[Step]) -> list[Step]:
    return [*steps, *(s.fallback for s in steps if s.fallback is not None)]
