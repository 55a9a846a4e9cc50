"""Judging the tests between nodes: which pair, rail, tray or scaling size is slow, and which
*node* (or port, or tray) the second pass convicts.

A pairing's first pass says only "one of these two, or the path between them". Every node
of a slow pair is then measured again with a node that passed (Google's cluster-health-
scanner second pass, GoogleCloudPlatform/cluster-health-scanner): a suspect slow again with a
known-good partner is convicted; one that is fine with it is cleared; when both nodes of a
slow pair are cleared, the pair was slow only together (the path between them, or a
transient) — a warning on both, nobody excluded. Where no known-good partner could re-test
a suspect (two nodes, every pair slow: a switch or another shared cause), the slow pair is
a cluster-level fail, "slow pair, unattributed", naming both nodes and the run that would
tell which: the cluster is not ready, yet neither node is convicted, drained or left out
(each carries a warning). A node that
passed its first pass is never convicted by someone else's second pass. A figure is judged
against the peers' median of the first pass (at least ``min_peers`` figures), else against
the profile's expected figure, and against its floor, with the node tests'
warn/fail percentages; the peers' median itself is judged against the profile, so that a
cluster slow as a whole is one cluster-level fail (shortfall) rather than a pass, or every
pair below the floor.

Pure functions of plain data (agent.model.qualify), like checks/qualify/judge.py.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...agent.model.qualify import CrossRun, Expectation
from ..core.finding import Action, Finding, Status, worst
from .judge import CATALOG, TEST_NAMES, StragglerRule, run_findings, short_of_profile


@dataclass
class Graded:
    """One cross-node figure (or the failed run in its place) and its status."""

    run: CrossRun
    component: str
    value: float | None
    status: Status
    reference: float | None = None
    basis: str = ""  # "peers' median" or "expected"
    why: str = ""
    unit: str = ""
    failed: bool = False  # the run itself failed (hung, printed a failure, used sockets)
    action: Action = Action.INVESTIGATE  # what its failure asks for, where it did not run

    def partner(self, node: str) -> str:
        return next((n for n in self.run.nodes if n != node), node)

    @property
    def deficit_pct(self) -> float | None:
        if not self.reference or self.value is None:
            return None
        return 100.0 * (1.0 - self.value / self.reference)

    def to_dict(self) -> dict[str, Any]:
        deficit = self.deficit_pct
        return {**self.run.to_dict(), "component": self.component,
                "value": None if self.value is None else round(self.value, 3),
                "unit": self.unit, "status": self.status.value,
                "reference": None if self.reference is None else round(self.reference, 3),
                "basis": self.basis, "why": self.why,
                "below_reference_pct": None if deficit is None else round(deficit, 2)}


def trouble(run: CrossRun) -> Finding | None:
    """The run's own failure (it hung, printed a failure, used sockets, exited non-zero,
    could not start): the first such finding, or None."""
    bad = [f for f in run_findings(run.run)
           if f.status in (Status.FAIL, Status.ERROR, Status.SKIP)]
    return bad[0] if bad else None


def _component(run: CrossRun) -> str:
    figure = run.figure
    return figure.component if figure is not None else "node"


def _first_figures(runs: Iterable[CrossRun]) -> list[float]:
    return [r.figure.value for r in runs if r.stage in ("first", "rack", "ring")
            and r.figure is not None and trouble(r) is None]


def peers_median(runs: Iterable[CrossRun], rule: StragglerRule) -> float | None:
    """The median of the first pass's figures, where there are ``min_peers`` of them."""
    firsts = _first_figures(runs)
    return statistics.median(firsts) if len(firsts) >= rule.min_peers else None


def shortfall(test: str, runs: Iterable[CrossRun], expectation: Expectation | None,
              rule: StragglerRule, who: str) -> Finding | None:
    """One cluster-level fail where the peers' median of a test between nodes falls short
    of the profile (below its floor, or more than ``fail_pct`` below its expected figure):
    every pair or rack slow alike is the fabric, a setting or a firmware, which no pair's
    relative judging would see and draining every node would not mend."""
    runs = list(runs)
    median = peers_median(runs, rule)
    why = short_of_profile(median, expectation, rule)
    if why is None or median is None or expectation is None:
        return None
    unit = next((r.figure.unit for r in runs if r.figure is not None), "")
    return Finding(
        Status.FAIL, "cluster",
        f"{TEST_NAMES[test]}: the {who} are slow as a whole, their median {median:.1f} "
        f"{unit} {why}", {"median": round(median, 2), "figures": len(_first_figures(runs)),
                          "unit": unit},
        {"expected": expectation.expected, "floor": expectation.floor,
         "source": expectation.source}, Action.INVESTIGATE, f"qualify.{test}")


def grade(runs: Iterable[CrossRun], expectation: Expectation | None,
          rule: StragglerRule) -> list[Graded]:
    """Every run's status: its failure, its floor, then its deficit against the first
    pass's median (or the expected figure when too few pairs ran)."""
    runs = list(runs)
    median = peers_median(runs, rule)
    reference, basis = None, ""
    if median is not None:
        reference, basis = median, "peers' median"
    elif expectation is not None and expectation.expected is not None:
        reference, basis = expectation.expected, "expected"
    # Peers slow as a whole are one cluster-level finding (shortfall), not every pair
    # below the floor: the floor then convicts nobody, the peers still find the straggler.
    floor = expectation.floor if expectation is not None \
        and short_of_profile(median, expectation, rule) is None else None
    out = []
    for run in runs:
        figure = run.figure
        bad = trouble(run)
        item = Graded(run, _component(run), None if figure is None else figure.value,
                      Status.PASS, reference, basis,
                      unit=figure.unit if figure is not None else "")
        deficit = item.deficit_pct
        if bad is not None:
            item.status, item.failed, item.action = bad.status, True, bad.action
            item.why = f"{bad.message}: {str(bad.observed)[:200]}" if bad.observed \
                else bad.message
        elif figure is None:
            item.status, item.why = Status.ERROR, "no figure"
        elif floor is not None and figure.value < floor:
            item.status, item.why = Status.FAIL, f"below the profile's floor {floor:g}"
        elif deficit is not None and deficit > rule.fail_pct:
            item.status, item.why = Status.FAIL, f"{deficit:.1f} % below the {basis}"
        elif deficit is not None and deficit > rule.warn_pct:
            item.status, item.why = Status.WARN, f"{deficit:.1f} % below the {basis}"
        out.append(item)
    return out


def _value(g: Graded) -> str:
    if g.value is not None and not g.failed:
        return f"{g.value:.1f} {g.unit}"
    return f"a failed run ({g.why[:160]})" if g.why else "no figure"


def _seen(g: Graded, node: str) -> dict[str, Any]:
    return {"partner": g.partner(node), "value": None if g.value is None else round(g.value, 2),
            "round": g.run.round, "status": g.status.value, "why": g.why}


def _expected(g: Graded, expectation: Expectation | None) -> dict[str, Any]:
    return {"reference": None if g.reference is None else round(g.reference, 2),
            "basis": g.basis, "unit": g.unit,
            "floor": expectation.floor if expectation else None,
            "source": expectation.source if expectation else None}


def _action(test: str, status: Status) -> Action:
    return CATALOG[f"qualify.{test}"] if status is Status.FAIL else Action.INVESTIGATE


def attribute(test: str, graded: list[Graded], expectation: Expectation | None = None
              ) -> tuple[dict[str, list[Finding]], list[Finding]]:
    """Findings per node from a pairing's two passes, and the cluster's own (a slow pair no
    known-good partner could attribute): see the module's docstring."""
    check, name = f"qualify.{test}", TEST_NAMES[test]
    out: dict[str, list[Finding]] = defaultdict(list)
    unattributed: dict[tuple[str, ...], Finding] = {}
    firsts = [g for g in graded if g.run.stage == "first"]
    seconds = [g for g in graded if g.run.stage == "second"]
    for g in (g for g in graded if g.run.stage == "odd"):  # the odd node, with a good one
        node = g.run.nodes[0]
        if g.status is Status.PASS:
            passed_odd = Finding(Status.PASS, g.component, f"{name} as expected with known-good "
                                 f"{g.partner(node)} ({_value(g)})", _seen(g, node),
                                 _expected(g, expectation), Action.NONE, check)
            out[node].append(passed_odd)
        else:
            out[node].append(Finding(
                g.status, g.component,
                f"{name}: {_value(g)} with known-good {g.partner(node)} (the odd node out of "
                f"the first pass){': ' + g.why if g.why else ''}", _seen(g, node),
                _expected(g, expectation), _action(test, g.status), check))
    passed: dict[str, list[Graded]] = defaultdict(list)
    suspect: dict[tuple[str, str], Graded] = {}
    for g in firsts:
        for node in g.run.nodes:
            if g.status is Status.PASS:
                passed[node].append(g)
            elif g.status in (Status.ERROR, Status.SKIP):
                out[node].append(Finding(g.status, g.component, f"{name}: the run with "
                                         f"{g.partner(node)} could not be judged", g.why,
                                         None, g.action, check))
            else:
                suspect[(node, g.component)] = g
    cleared: dict[tuple[str, str], list[Graded]] = {}
    for (node, component), first in sorted(suspect.items()):
        again = [g for g in seconds if node in g.run.nodes and g.component == component]
        judged = [g for g in again if g.status not in (Status.ERROR, Status.SKIP)]
        observed: dict[str, Any] = {"value": first.value if not judged else judged[0].value,
                                    "first": _seen(first, node),
                                    "second": [_seen(g, node) for g in again]}
        if judged and all(g.status is not Status.PASS for g in judged):
            status = worst(g.status for g in judged)
            goods = ", ".join(f"{_value(g)} with known-good {g.partner(node)}" for g in judged)
            message = (f"{name}: slow with every partner: {_value(first)} with "
                       f"{first.partner(node)} (first pass), {goods} (second pass)")
            out[node].append(Finding(status, component, message, observed,
                                     _expected(first, expectation), _action(test, status),
                                     check))
        elif not judged:  # "one of the two, or the path": not a verdict on either node
            message = (f"{name}: {_value(first)} with {first.partner(node)} and no "
                       "known-good partner to tell which of the two is slow")
            out[node].append(Finding(Status.WARN, component, message, observed,
                                     _expected(first, expectation), Action.INVESTIGATE,
                                     check))
            pair = tuple(sorted(first.run.nodes))
            if first.status is Status.FAIL and pair not in unattributed:
                unattributed[pair] = Finding(
                    Status.FAIL, f"{pair[0]} and {pair[1]}",
                    f"slow pair, unattributed: {name} {_value(first)} between {pair[0]} and "
                    f"{pair[1]}, and no node passed to tell which of the two (or the path) is "
                    f"slow; attribute it by qualifying both with nodes that pass (clusterdiag "
                    f"qualify --tests {test} --nodes {pair[0]},{pair[1]},<more nodes>)",
                    {"value": first.value, "round": first.run.round, "why": first.why},
                    _expected(first, expectation), Action.INVESTIGATE, check)
        else:
            cleared[(node, component)] = again
    for (node, component), again in sorted(cleared.items()):
        first = suspect[(node, component)]
        other = (first.partner(node), component)
        good = next(g for g in again if g.status is Status.PASS)
        observed = {"value": good.value, "first": _seen(first, node),
                    "second": [_seen(g, node) for g in again]}
        if other in cleared:
            message = (f"{name}: {_value(first)} only together with {first.partner(node)}; "
                       f"{_value(good)} with known-good {good.partner(node)}: the path between "
                       "the two, or a transient")
            out[node].append(Finding(Status.WARN, component, message, observed,
                                     _expected(first, expectation), Action.INVESTIGATE, check))
        else:
            message = (f"{name} as expected with known-good {good.partner(node)} "
                       f"({_value(good)}); cleared of its first-pass partner's slowness")
            out[node].append(Finding(Status.PASS, component, message, observed,
                                     _expected(first, expectation), Action.NONE, check))
    for node, items in sorted(passed.items()):
        if any(f.check == check for f in out.get(node, [])):
            continue
        low = min(items, key=lambda g: g.value or 0.0)
        out[node].append(Finding(
            Status.PASS, "node", f"{name} as expected",
            {"lowest": None if low.value is None else round(low.value, 2),
             "component": low.component, "partner": low.partner(node), "figures": len(items)},
            _expected(low, expectation), Action.NONE, check))
    return dict(out), list(unattributed.values())


@dataclass
class ScalingPoint:
    nodes: int
    ring: float | None
    default: float | None
    efficiency: float | None  # ring / two-node ring
    status: Status
    group: str = ""  # the kind of node (profile) of the curve: kinds never mix in a run

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "group": self.group,
                "ring_busbw": None if self.ring is None else round(self.ring, 2),
                "default_busbw": None if self.default is None else round(self.default, 2),
                "efficiency_pct": None if self.efficiency is None
                else round(100 * self.efficiency, 2), "status": self.status.value}


def scaling_curve(runs: Iterable[CrossRun], rule: StragglerRule,
                  expectation: Expectation | None = None, group: str = ""
                  ) -> tuple[list[ScalingPoint], list[Finding]]:
    """Bus bandwidth at each size with NCCL_ALGO=Ring and with NCCL's default, the Ring
    figure's efficiency against the two-node Ring figure, and where it breaks: the first
    size more than ``fail_pct`` below (a warning for the cluster; nobody is excluded for
    how the fabric scales). A run that failed is a warning naming its size. The two-node
    Ring figure is also judged against the profile (``expectation``: the pairs' figure, the
    same all-reduce over two nodes): a curve that holds 100 % of a slow start is a
    cluster-level fail, not a pass."""
    by_size: dict[int, dict[str, CrossRun]] = defaultdict(dict)
    for run in runs:
        by_size[len(run.nodes)][run.stage] = run
    findings: list[Finding] = []

    def figure(run: CrossRun | None) -> float | None:
        if run is None:
            return None
        bad = trouble(run)
        if bad is not None:
            findings.append(Finding(Status.WARN, "cluster", f"the all-reduce over "
                                    f"{len(run.nodes)} nodes ({run.stage}) failed: "
                                    f"{bad.message}", str(bad.observed)[:300], None,
                                    Action.INVESTIGATE, "qualify.scaling"))
            return None
        return run.figure.value if run.figure is not None else None

    points = []
    for size in sorted(by_size):
        ring = figure(by_size[size].get("ring"))
        default = figure(by_size[size].get("default"))
        points.append(ScalingPoint(size, ring, default, None, Status.PASS, group))
    base = points[0].ring if points else None
    slow_start = short_of_profile(base, expectation, rule)
    if slow_start is not None and expectation is not None and base is not None:
        findings.append(Finding(
            Status.FAIL, "cluster",
            f"{TEST_NAMES['scaling']}{f' ({group})' if group else ''}: the two-node Ring "
            f"all-reduce, {base:.1f} GB/s, is {slow_start}: the curve starts slow",
            {"nodes": points[0].nodes, "ring_busbw": base},
            {"expected": expectation.expected, "floor": expectation.floor,
             "source": expectation.source}, Action.INVESTIGATE, "qualify.scaling"))
    for point in points:
        if base and point.ring is not None:
            point.efficiency = point.ring / base
            lost = 100.0 * (1.0 - point.efficiency)
            point.status = Status.FAIL if lost > rule.fail_pct else \
                Status.WARN if lost > rule.warn_pct else Status.PASS
    broken = next((p for p in points if p.status is Status.FAIL), None)
    if broken is not None and broken.efficiency is not None:
        findings.append(Finding(
            Status.WARN, "cluster",
            f"the Ring all-reduce scales to {100 * broken.efficiency:.1f} % of the two-node "
            f"figure at {broken.nodes} nodes (more than {rule.fail_pct:g} % lost)",
            {"nodes": broken.nodes, "ring_busbw": broken.ring, "two_node_ring": base,
             "default_busbw": broken.default},
            {"efficiency_pct": 100 - rule.fail_pct}, Action.INVESTIGATE, "qualify.scaling"))
    elif points and base:
        last = points[-1]
        findings.append(Finding(
            Status.PASS, "cluster", f"the Ring all-reduce scales to "
            f"{100 * (last.efficiency or 0):.1f} % of the two-node figure at {last.nodes} "
            "nodes", {"nodes": last.nodes, "ring_busbw": last.ring, "two_node_ring": base},
            {"efficiency_pct": 100 - rule.fail_pct}, Action.NONE, "qualify.scaling"))
    return points, findings


def imex_findings(channels: Mapping[str, str | None]) -> dict[str, list[Finding]]:
    """A tray without an IMEX channel cannot take part in multi-node NVLink (NCCL MNNVL
    needs a working IMEX domain on every tray, per NCCL's env doc)."""
    out: dict[str, list[Finding]] = {}
    for node, problem in sorted(channels.items()):
        if problem is not None:
            out[node] = [Finding(Status.FAIL, "node", "no IMEX channel: multi-node NVLink "
                                 "cannot run on this tray", problem,
                                 "/dev/nvidia-caps-imex-channels/channel0",
                                 Action.FIX_CONFIG, "qualify.rack")]
    return out


def rack_findings(rack: str, graded: Graded, trays: Iterable[str]
                  ) -> dict[str, list[Finding]]:
    """The rack-wide figure on each tray: a pass, or (when the localisation named no tray)
    the rack's slowness on every tray as a warning."""
    name = TEST_NAMES["rack"]
    message = f"{name} over {len(graded.run.nodes)} trays of {rack}: {_value(graded)}"
    observed = {"value": graded.value, "trays": len(graded.run.nodes), "rack": rack}
    expected = {"reference": graded.reference, "basis": graded.basis, "unit": graded.unit}
    status = Status.PASS if graded.status is Status.PASS else Status.WARN
    why = "" if status is Status.PASS else f" ({graded.why}; no single tray convicted)"
    return {t: [Finding(status, "node", message + why, observed, expected,
                        Action.NONE if status is Status.PASS else Action.INVESTIGATE,
                        "qualify.rack")] for t in trays}
