"""cluster.imex_domain: a tray missing from its IMEX domain is named, not its domain.

Each tray's ``nvidia-imex-ctl -N`` lists every node of the domain with its status, so when
one tray's daemon is gone every other tray's domain reads DEGRADED and fabric.imex warns on
all of them. Across trays the missing one is plain: the peer the trays that list it agree
is not READY. That peer is mapped back to its node and fails alone, so it lands in
``bad_nodes`` for ``--exclude`` (a cluster finding: nothing is drained), and the trays that
only saw it go stay ready.

Each peer entry is first mapped to a node (an IP address or host name from the nodes
file), in this order:

- the tray that reports the entry as its own (``inventory.imex.own``: the nodes-file
  entries matching the tray's local addresses or its name, as the IMEX daemon finds its own
  entry; agent/collectors/imex.py); an entry two nodes claim maps to neither;
- a node of this run that claims no entry of its own, whose name is the entry, or the first
  label of the entry or of the peer's host name. A host name comes from another tray's
  report, so it never maps an entry onto a tray that says which entries are it.

Then each node is voted on once per other tray (a tray listing it READY under any entry
says READY). A node fails only when it did not list itself READY (a tray whose daemon
runs and lists itself READY is at most a "trays disagree" warning), at least two other
trays list it not READY, and those are a strict majority of the trays listing it: one tray
that lost its link to a healthy peer, or holds a stale nodes file, never fails that peer.

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
# Other trays that must list a node not READY before it fails: one tray's view (a stale
# nodes file, a lost link, a hostile report) never fails another tray alone.
MIN_VOTERS = 2


@dataclass
class _Votes:
    """What the other trays that list one node (or one unmapped peer) say of it."""

    peer: ImexPeerView
    ready: set[str] = field(default_factory=set)
    down: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, voter: str, status: str) -> None:
        """One voter, one voice: a voter listing the node READY under any entry says
        READY (a second, stale entry of its nodes file does not outvote its live one)."""
        if status == READY:
            self.ready.add(voter)
            for voters in self.down.values():
                voters.discard(voter)
        elif voter not in self.ready:
            self.down[status].add(voter)

    def downs(self) -> set[str]:
        return set().union(*self.down.values())

    def said(self) -> dict[str, str]:
        return {status: fold(sorted(nodes)) for status, nodes in sorted(self.down.items())
                if nodes}


def _owners(nodes: Sequence[NodeSummary]) -> dict[str, str]:
    """Nodes-file entry -> the one node that reports it as its own."""
    claims: dict[str, set[str]] = defaultdict(set)
    for summary in nodes:
        if summary.answered and summary.facts.imex is not None:
            for entry in summary.facts.imex.own:
                claims[entry].add(summary.node)
    return {entry: next(iter(owners)) for entry, owners in claims.items() if len(owners) == 1}


def _node_of(peer: ImexPeerView, owners: dict[str, str], names: set[str]) -> str | None:
    """The node a peer entry is: the tray claiming its address, else a node named by it
    that claims no entry of its own (a tray that says which entries are it is not also
    every entry another tray's report gives its name)."""
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


@dataclass
class _Tally:
    """The votes of every tray that read its domain: per node, and per unmapped peer."""

    nodes: dict[str, _Votes] = field(default_factory=dict)
    unmapped: dict[str, _Votes] = field(default_factory=dict)
    self_ready: set[str] = field(default_factory=set)
    listing: int = 0


def _tally(nodes: Sequence[NodeSummary]) -> _Tally:
    """Map every peer entry to its node first, then count each other tray's view of that
    node once; a tray listing itself READY is recorded apart (its daemon runs)."""
    owners = _owners(nodes)
    unclaimed = {s.node for s in nodes
                 if not (s.answered and s.facts.imex is not None and s.facts.imex.own)}
    tally = _Tally()
    for summary in nodes:
        view = summary.facts.imex if summary.answered else None
        if view is None or view.status is None:
            continue
        tally.listing += 1
        for peer in view.peers:
            node = _node_of(peer, owners, unclaimed)
            if node == summary.node:
                if peer.status == READY:
                    tally.self_ready.add(node)
                continue
            if node is None:
                tally.unmapped.setdefault(peer.host, _Votes(peer)).add(summary.node,
                                                                       peer.status)
            else:
                tally.nodes.setdefault(node, _Votes(peer)).add(summary.node, peer.status)
    return tally


def _peer_name(peer: ImexPeerView) -> str:
    return f"#{peer.index} {peer.host}" + (f" ({peer.host_name})" if peer.host_name else "")


def _disagreement(ready: set[str], vote: _Votes) -> dict[str, str]:
    return ({"READY": fold(sorted(ready))} if ready else {}) | vote.said()


def _judge(node: str, vote: _Votes, tally: _Tally) -> bool:
    """Whether the other trays fail ``node``: it did not list itself READY, at least
    ``MIN_VOTERS`` other trays list it not READY, and they are a strict majority of the
    trays listing it, its own view counted."""
    if node in tally.self_ready:
        return False
    downs = len(vote.downs())
    return downs >= MIN_VOTERS and downs > len(vote.ready)


def imex_domain(nodes: Sequence[NodeSummary]) -> list[ClusterFinding]:
    tally = _tally(nodes)
    if not tally.listing:
        return [tagged(CHECK, Finding.skip("cluster", "no tray reported its IMEX domain"))]
    by_name = {s.node: s for s in nodes}
    found: list[ClusterFinding] = []
    unmapped: dict[str, dict[str, str]] = {}
    disputed: dict[str, dict[str, str]] = {}
    silent = False
    for vote in sorted(tally.unmapped.values(), key=lambda v: (v.peer.index, v.peer.host)):
        if not vote.downs():
            continue
        if len(vote.downs()) > len(vote.ready):
            unmapped[_peer_name(vote.peer)] = vote.said()
        else:
            disputed[_peer_name(vote.peer)] = _disagreement(vote.ready, vote)
    for node, vote in sorted(tally.nodes.items()):
        if not vote.downs():
            continue
        if not by_name[node].answered:  # cluster.reachability already names it
            silent = True
        elif _judge(node, vote, tally):
            rack = by_name[node].rack
            found.append(tagged(CHECK, Finding.fail(
                f"rack {rack}" if rack else "cluster",
                "tray missing from its IMEX domain (the other trays list it not READY)",
                {"tray": node, "peer": _peer_name(vote.peer), **vote.said()}, READY,
                Action.INVESTIGATE), [node]))
        else:
            itself = {node} if node in tally.self_ready else set()
            disputed[f"{node} ({_peer_name(vote.peer)})"] = _disagreement(
                vote.ready | itself, vote)
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
            "cluster", "every IMEX peer READY in the trays' views", tally.listing, READY)))
    return found
