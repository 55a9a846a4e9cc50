"""Which nodes meet in which round: the pairing of the cross-node tests and its cost.

Exhaustive pairs are N(N-1)/2 runs (GCM ``--pairwise``), N-1 rounds even when run in
parallel (SuperBench's circle method); one disjoint pairing run all at once is one round
(cluster-health-scanner's blast mode, Imbue), and the second pass is about one more
(cluster-health-scanner's second pass). So: round 1 pairs neighbours inside each rack
first (the pair shares a leaf switch, MegaScale's ToR-local test), then what each rack had
left over across racks; an odd node out waits for round 2. Round 2 gives every suspect
(and the odd node) a known-good partner, each good node once per round, so it takes
ceil(suspects / good) rounds — one while fewer than half the nodes are suspect. The cost
in rounds does not grow with N. The pairing is in node-name order: no seed, so a rerun
meets the same partners.

Which tests run when ``--tests`` is not given is decided here too, from each test's
declaration (checks/qualify/active.py: its scope, ``min_nodes`` and ``needs_rails``): every
test that applies to the nodes at hand.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ...checks.profiles.profile import Profile
from ...checks.qualify.active import Scope, cross_tests

Pair = tuple[str, str]
GROUPS = tuple(s.value for s in Scope)
"""The ``--tests`` groups, in the order a qualification runs them and keeps them when the
budget is short: the node tests first, then pairs, rails, scaling, rack."""


def first_pairing(nodes: Sequence[str], rack_of: Mapping[str, str] | None = None
                  ) -> tuple[list[Pair], list[str]]:
    """Disjoint pairs covering every node but at most one, and the one left out."""
    racks: dict[str, list[str]] = {}
    for node in sorted(nodes):
        racks.setdefault((rack_of or {}).get(node, ""), []).append(node)
    pairs: list[Pair] = []
    spare: list[str] = []
    for members in racks.values():
        pairs += [(members[i], members[i + 1]) for i in range(0, len(members) - 1, 2)]
        if len(members) % 2:
            spare.append(members[-1])
    pairs += [(spare[i], spare[i + 1]) for i in range(0, len(spare) - 1, 2)]
    return pairs, spare[-1:] if len(spare) % 2 else []


def second_pass(suspects: Sequence[str], good: Sequence[str]) -> list[list[Pair]]:
    """Rounds of (suspect, known-good partner), disjoint within each round; empty when
    there is no suspect or no good node to pair it with."""
    if not suspects or not good:
        return []
    rounds: list[list[Pair]] = []
    queue = list(suspects)
    while queue:
        batch, queue = queue[:len(good)], queue[len(good):]
        offset = len(rounds) * len(batch)  # later rounds meet other good nodes
        rounds.append([(s, good[(offset + i) % len(good)]) for i, s in enumerate(batch)])
    return rounds


def scaling_sizes(count: int) -> list[int]:
    """2, 4, 8 … below ``count``, then ``count`` itself."""
    sizes = [2 ** k for k in range(1, int(math.log2(count)) + 1)] if count >= 2 else []
    return sizes + ([count] if count >= 2 and count not in sizes else [])


def peer_groups(nodes: Sequence[str], profiles: Mapping[str, Profile]) -> list[list[str]]:
    """The nodes by kind (same profile and fabric), as the tests between nodes group them:
    a pair, a rail or a scaling run never mixes kinds."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        profile = profiles[node]
        groups.setdefault((profile.name, profile.hca_link_layer or ""), []).append(node)
    return [members for _, members in sorted(groups.items())]


def has_rails(profile: Profile) -> bool:
    """Whether a node of ``profile`` may have compute rails: the profile says it has, or
    does not say (the node's own inventory decides then)."""
    return profile.compute_hcas is None or profile.compute_hcas > 0


def nvl72_racks(racks: Mapping[str, Sequence[str]], profiles: Mapping[str, Profile]
                ) -> dict[str, list[str]]:
    """The racks whose trays are all of an NVL72 profile, limited to the nodes at hand."""
    out = {}
    for rack, trays in racks.items():
        here = [t for t in trays if t in profiles]
        if here and all(profiles[t].nvl72 for t in here):
            out[rack] = here
    return out


def default_groups(nodes: Sequence[str], profiles: Mapping[str, Profile],
                   racks: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The ``--tests`` groups that apply without ``--tests``: the node tests always; a test
    between nodes where a kind of node has ``min_nodes`` of its declaration (with compute
    rails where it ``needs_rails``), and the rack test where NVL72 racks hold that many
    trays."""
    groups = peer_groups(nodes, profiles)
    wanted = {Scope.NODE.value}
    for test in cross_tests():
        if test.scope is Scope.RACK:
            sizes = [len(trays) for trays in nvl72_racks(racks, profiles).values()]
        elif test.needs_rails:
            sizes = [sum(1 for n in g if has_rails(profiles[n])) for g in groups]
        else:
            sizes = [len(g) for g in groups]
        if max(sizes, default=0) >= test.min_nodes:
            wanted.add(test.scope.value)
    return tuple(g for g in GROUPS if g in wanted)
