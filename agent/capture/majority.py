"""A site profile from the majority of a fleet's snapshots, and the nodes that deviate
from it (``clusterdiag profiles capture --from-snapshot FILE...``, the
cluster-wide form).

Each snapshot is captured as the node form does (agent/capture/profile.py), against one
base; each value the profile would hold is then the value most nodes have, if more than
half of those that had it agree. A node whose value differs, or that had none (its NVML
was unreadable, say), is a deviation: which key, its value, the majority's. A key with no
majority is left to the base and a comment says so. Node names appear only in the
deviations, never in the profile: one profile serves every node of the model.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .profile import Capture


@dataclass(frozen=True)
class Deviation:
    node: str
    key: str
    value: Any  # None: the node had no value for the key (not read there)
    majority: Any
    agree: int  # nodes with the majority's value
    nodes: int  # snapshots in all

    def line(self) -> str:
        seen = "not read" if self.value is None else json.dumps(self.value)
        return (f"{self.node}: {self.key} {seen}, the majority {json.dumps(self.majority)} "
                f"({self.agree} of {self.nodes} snapshots)")


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def majority(captures: list[tuple[str, Capture]], extends: str
             ) -> tuple[Capture, list[Deviation]]:
    """The profile most of ``captures`` (node, capture) agree on, and who does not."""
    total = len(captures)
    merged = Capture(extends=extends)
    deviations: list[Deviation] = []
    keys = list(dict.fromkeys(k for _, cap in captures for k in cap.values))
    for key in keys:
        votes = Counter(_key(cap.values[key]) for _, cap in captures if key in cap.values)
        (winner, agree), *_ = votes.most_common(1)
        if agree * 2 <= total:
            seen = ", ".join(f"{value} x{count}" for value, count in votes.most_common(4))
            merged.notes.append(f"{key}: no majority ({seen}): inherited from {extends}")
            continue
        value = json.loads(winner)
        source = next(cap.comments[key] for _, cap in captures
                      if key in cap.values and _key(cap.values[key]) == winner)
        merged.set(key, value, f"{source}; {agree} of {total} snapshots")
        deviations += [Deviation(node, key, cap.values.get(key), value, agree, total)
                       for node, cap in captures if _key(cap.values.get(key)) != winner]
    notes = Counter(note for _, cap in captures for note in dict.fromkeys(cap.notes))
    merged.notes += [note for note, count in notes.items() if count * 2 > total]
    return merged, sorted(deviations, key=lambda d: (d.node, d.key))
