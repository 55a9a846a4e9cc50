"""cluster.imex_domain: a tray missing from its IMEX domain is named, not its domain.

Each tray's ``nvidia-imex-ctl -N`` lists every node of the domain with its status, so when
one tray's daemon is gone every other tray's domain reads DEGRADED and fabric.imex warns on
all of them. Across trays the missing one is plain: the peer the trays that list it agree
is not READY. That peer is mapped back to its node and fails alone, so it lands in
``bad_nodes`` for ``--exclude`` (a cluster finding: nothing is drained), and the trays that
only saw it go stay ready.

Agreement is a strict majority of the trays that list the peer, its own view counted (a
tray whose daemon runs lists itself READY): one tray that lost its link to a healthy peer
does not fail that peer, it warns. Mapping a peer (an IP address or host name from the
nodes file) to a node, in this order:

- the tray that reports the entry as its own (``inventory.imex.own``: the nodes-file
  entries matching the tray's local addresses or its name, as the IMEX daemon finds its own
  entry; agent/collectors/imex.py); an entry two nodes claim maps to neither;
- a node of this run whose name is the entry, or the first label of the entry or of the
  peer's host name.

A peer no node maps to is named by its address in a cluster-level warning. A peer that maps
to a node that did not answer is left to cluster.reachability, which already names it.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...checks.core.finding import Action, Finding
from ..model.cluster import ClusterFinding, fold
from ..model.summary import ImexPeerView, NodeSummary
from .common import tagged

CHECK = "cluster.imex_domain"
READY = "READY"


@dataclass
class _Votes:
    """What the trays that list one peer say of it."""

    peer: ImexPeerView
    ready: list[str] = field(default_factory=list)
    down: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def missing(self) -> bool:
        return sum(len(nodes) for nodes in self.down.values()) > len(self.ready)

    def said(self) -> dict[str, str]:
        return {status: fold(nodes) for status, nodes in sorted(self.down.items())}


def _owners(nodes: Sequence[NodeSummary]) -> dict[str, str]:
    """Nodes-file entry -> the one node that reports it as its own."""
    claims: dict[str, set[str]] = defaultdict(set)
    for summary in nodes:
        if summary.answered and summary.facts.imex is not None:
            for entry in summary.facts.imex.own:
                claims[entry].add(summary.node)
    return {entry: next(iter(owners)) for entry, owners in claims.items() if len(owners) == 1}


def _node_of(peer: ImexPeerView, owners: dict[str, str], names: set[str]) -> str | None:
    if peer.host in owners:
        return owners[peer.host]
    for name in (peer.host, peer.host_name):
        if name is None or _is_address(name):
            continue
        for candidate in (name, name.split(".", 1)[0]):
            if candidate in names:
                return candidate
    return None


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _votes(nodes: Sequence[NodeSummary]) -> tuple[dict[str, _Votes], int]:
    """Per peer address, what the trays listing it say; and how many trays listed any."""
    votes: dict[str, _Votes] = {}
    listing = 0
    for summary in nodes:
        view = summary.facts.imex if summary.answered else None
        if view is None or view.status is None:
            continue
        listing += 1
        for peer in view.peers:
            entry = votes.setdefault(peer.host, _Votes(peer))
            if peer.status == READY:
                entry.ready.append(summary.node)
            else:
                entry.down[peer.status].append(summary.node)
    return votes, listing


def _peer_name(peer: ImexPeerView) -> str:
    return f"#{peer.index} {peer.host}" + (f" ({peer.host_name})" if peer.host_name else "")


def imex_domain(nodes: Sequence[NodeSummary]) -> list[ClusterFinding]:
    votes, listing = _votes(nodes)
    if not listing:
        return [tagged(CHECK, Finding.skip("cluster", "no tray reported its IMEX domain"))]
    owners = _owners(nodes)
    by_name = {s.node: s for s in nodes}
    found: list[ClusterFinding] = []
    unmapped: dict[str, dict[str, str]] = {}
    disputed: dict[str, dict[str, str]] = {}
    silent = False
    for vote in sorted(votes.values(), key=lambda v: (v.peer.index, v.peer.host)):
        if not vote.down:
            continue
        if not vote.missing:
            disputed[_peer_name(vote.peer)] = {"READY": fold(vote.ready), **vote.said()}
            continue
        node = _node_of(vote.peer, owners, set(by_name))
        if node is None:
            unmapped[_peer_name(vote.peer)] = vote.said()
        elif not by_name[node].answered:  # cluster.reachability already names it
            silent = True
        else:
            rack = by_name[node].rack
            found.append(tagged(CHECK, Finding.fail(
                f"rack {rack}" if rack else "cluster",
                "tray missing from its IMEX domain (the other trays list it not READY)",
                {"tray": node, "peer": _peer_name(vote.peer), **vote.said()}, READY,
                Action.INVESTIGATE), [node]))
    if unmapped:
        found.append(tagged(CHECK, Finding.warn(
            "cluster", "IMEX peer not READY is no node of this run (named by its address)",
            unmapped, READY, Action.INVESTIGATE)))
    if disputed:
        found.append(tagged(CHECK, Finding.warn(
            "cluster", "trays disagree on an IMEX peer's status (a link, not the peer)",
            disputed, READY, Action.INVESTIGATE)))
    if not found and not silent:
        found.append(tagged(CHECK, Finding.passed(
            "cluster", "every IMEX peer READY in the trays' views", listing, READY)))
    return found
