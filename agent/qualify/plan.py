"""Which tool runs for which node test, with which arguments, environment and deadline: built
from each test's declaration (checks/qualify/active.py) and the node's inventory.

Tests that share an invocation run as one: nvbandwidth copies host to device, device to
host, device to device and within a GPU in one run (``-t`` takes several testcases). A
test whose tool needs something the inventory could not find is planned as an error that
names it (a compare kernel gpu_burn would not find is no node fault), and one whose
program is missing falls back where its declaration has a fallback (DCGM's diagnostic for
gpu_burn).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...checks.core.levels import Level
from ...checks.qualify.active import (
    ACTIVE_TESTS,
    FALLBACKS,
    GPU_BURN,
    PERFTEST_LOOPBACK,
    ActiveTest,
    Invocation,
    fill,
    node_tests,
)
from .inventory import Inventory, Rail, compare_problem

# Each invocation's default deadline, and the inventory's (config qualify.deadline_s).
DEADLINES = {**{t.invocation.name: t.invocation.deadline_s for t in ACTIVE_TESTS.values()},
             "inventory": 30.0}
NODE_TESTS = tuple(t.id for t in node_tests())
NIC_PORT_BASE = 18515  # perftest's default port (perftest_parameters.h DEF_PORT); AzNHC's 8
# loopbacks use 18510-18517


@dataclass(frozen=True)
class Step:
    test: str  # the run's name (its invocation's): a test id, or nvbandwidth
    tool: str  # the parser: nccl-tests, nvbandwidth, perftest, gpu_burn, dcgmi
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    deadline_s: float = 300.0
    server_argv: tuple[str, ...] | None = None  # loopback: the server half, same node
    component: str = "node"
    fallback: Step | None = None  # run instead when this one's tool is not installed
    tests: tuple[str, ...] = ()  # the test ids its figures belong to
    error: str | None = None  # it cannot run as planned: the run is this error, not started
    missing: bool = False  # the node said its program is not installed: not started
    install: str = ""  # what a skip for a missing program says


def program(name: str, tools: Mapping[str, Any]) -> str:
    return str(tools.get(name) or name)


def iterations(level: Level) -> str:
    """nccl-tests' ``-n`` at ``level``: 20 timed iterations per size (nccl-tests' own
    default, src/common.cu), 100 at ``full`` for a steadier figure."""
    return "100" if level == Level.FULL else "20"


def _values(inventory: Inventory, level: Level, settings: Mapping[str, Any],
            doubles: bool) -> dict[str, str]:
    burn = float(settings.get("burn_s", 30.0)) * (4 if level == Level.FULL else 1)
    return {"gpus": str(len(inventory.gpus)), "iters": iterations(level),
            "precision": "-d" if doubles else "",
            "burn_s": str(int(burn)), "dcgm_level": "3" if level == Level.FULL else "2",
            "compare": inventory.gpu_burn_compare or ""}


def _step(invocation: Invocation, tests: tuple[ActiveTest, ...], values: Mapping[str, str],
          settings: Mapping[str, Any], **extra: Any) -> Step:
    tools = settings.get("tools") or {}
    deadlines = {**DEADLINES, **(settings.get("deadline_s") or {})}
    argv = (program(invocation.program, tools),
            *fill(invocation.argv, {**values, "selectors": " ".join(t.selector for t in tests)}))
    deadline = float(deadlines[invocation.name])
    if invocation is GPU_BURN:
        deadline += float(values["burn_s"])
    return Step(invocation.name, invocation.parser, argv, invocation.env, deadline,
                tests=tuple(t.id for t in tests), install=invocation.install, **extra)


def _applies(test: ActiveTest, inventory: Inventory) -> bool:
    return bool(inventory.gpus) and (not test.needs_rails or bool(inventory.rails))


def _invocations(tests: frozenset[str], inventory: Inventory
                 ) -> Iterator[tuple[Invocation, tuple[ActiveTest, ...]]]:
    """Each invocation the node runs, with the wanted tests it serves, in declaration order."""
    seen: dict[str, list[ActiveTest]] = {}
    order: list[Invocation] = []
    for test in node_tests():
        if test.id in tests and _applies(test, inventory):
            if test.invocation.name not in seen:
                order.append(test.invocation)
            seen.setdefault(test.invocation.name, []).append(test)
    for invocation in order:
        yield invocation, tuple(seen[invocation.name])


def use_cuda(rail: Rail, inventory: Inventory) -> str:
    """perftest's GPU-memory option for ``rail``, or nothing (host memory) where the build
    lacks CUDA or no GPU sits near the rail."""
    return f"--use_cuda={rail.gpu}" if inventory.perftest_cuda and rail.gpu is not None else ""


def node_steps(inventory: Inventory, level: Level, settings: Mapping[str, Any],
               tests: frozenset[str], doubles: bool = True) -> list[Step]:
    """The node's steps, in the order they run (one at a time: they share the GPUs);
    ``doubles``: gpu_burn in FP64 (the profile's gpu_burn_doubles)."""
    values = _values(inventory, level, settings, doubles)
    steps: list[Step] = []
    for invocation, served in _invocations(tests, inventory):
        if invocation is PERFTEST_LOOPBACK:
            for i, rail in enumerate(inventory.rails):
                server = _step(invocation, served, {
                    **values, "hca": rail.hca, "port": str(rail.port),
                    "use_cuda": use_cuda(rail, inventory), "tcp_port": str(NIC_PORT_BASE + i)},
                    settings, component=f"{rail.hca}/{rail.port}")
                steps.append(replace(server, argv=(*server.argv, "localhost"),
                                     server_argv=server.argv))
            continue
        fallback = FALLBACKS.get(served[0].id)
        back = _step(fallback, served, values, settings) if fallback is not None else None
        if invocation is GPU_BURN:
            steps.append(_gpu_burn(inventory, served, values, settings, back))
            continue
        steps.append(_step(invocation, served, values, settings, fallback=back))
    return steps


def _gpu_burn(inventory: Inventory, served: tuple[ActiveTest, ...], values: Mapping[str, str],
              settings: Mapping[str, Any], fallback: Step | None) -> Step:
    """gpu_burn with its compare kernel named (-c), else what the inventory found instead:
    no gpu_burn at all (its fallback runs), or a compare file it would misread."""
    compare = inventory.gpu_burn_compare
    if compare is None:
        why = next((p for p in inventory.problems if p.startswith("gpu_burn's")), "unknown")
        if "which " in why:  # not on the node's PATH: not installed
            return _step(GPU_BURN, served, {**values, "compare": "?"}, settings,
                         fallback=fallback, missing=True)
        return _step(GPU_BURN, served, {**values, "compare": "?"}, settings,
                     error=f"gpu_burn not run: {why}")
    problem = compare_problem(compare)
    return _step(GPU_BURN, served, values, settings, fallback=fallback,
                 error=None if problem is None else f"gpu_burn not run: {problem}")
