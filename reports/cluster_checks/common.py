"""Helpers the cross-node checks share: grouping nodes and finding the majority."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from ...checks.core.finding import Finding
from ..model.cluster import ClusterFinding, fold
from ..model.summary import NodeSummary

T = TypeVar("T", bound=Hashable)


def by_profile(nodes: Iterable[NodeSummary]) -> dict[str, list[NodeSummary]]:
    """Answered nodes per profile: a GB200 rack legitimately differs from the DGX beside it."""
    groups: dict[str, list[NodeSummary]] = defaultdict(list)
    for summary in nodes:
        if summary.answered:
            groups[summary.profile].append(summary)
    return dict(groups)


def majority(values: Iterable[T]) -> T:
    """The most common value; ties go to the smallest, so the answer does not depend on
    the order nodes answered in."""
    counts = Counter(values)
    return min(counts, key=lambda v: (-counts[v], str(v)))


def minority_by_value(items: Sequence[tuple[str, T]], expected: T) -> dict[T, list[str]]:
    odd: dict[T, list[str]] = defaultdict(list)
    for node, value in items:
        if value != expected:
            odd[value].append(node)
    return dict(odd)


def observed_sets(odd: dict[T, list[str]], show: Callable[[T], object] = str) -> dict[str, str]:
    """value -> folded node set, the form a person reads and pastes."""
    return {str(show(value)): fold(nodes) for value, nodes in sorted(odd.items(), key=str)}


def tagged(check: str, finding: Finding, nodes: Iterable[str] = ()) -> ClusterFinding:
    return ClusterFinding(finding.replace(check=check), tuple(sorted(set(nodes))))
