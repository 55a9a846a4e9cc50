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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Pair = tuple[str, str]


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
