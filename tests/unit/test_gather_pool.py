"""The gather's deadline: no node is started after it, none is left running past it; a
node asked and silent by then fails cluster.reachability, and one never asked is an error
(the deadline is ours), unjudged and never excluded.

The pool's clock is a fake one that the work itself moves, so what starts and what does not
is decided by the test, not by how fast the machine is.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from clusterdiag.checks.core.finding import Status
from clusterdiag.reports.cluster_checks import ClusterSettings, Unreachable, judge
from clusterdiag.reports.fleet.gather import GatherSettings, gather_agent
from clusterdiag.reports.fleet.pool import within_deadline
from clusterdiag.reports.render.terminal import render_terminal


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_node_starts_after_the_deadline() -> None:
    clock = FakeClock()
    started: list[int] = []

    async def work(index: int) -> int:
        started.append(index)
        clock.now += 10.0
        await asyncio.sleep(0)
        return index * 2

    pooled = asyncio.run(within_deadline(10, work, 2, 35.0, clock))
    assert started == [0, 1, 2, 3]  # started at 0, 10, 20 and 30 s; at 40 s none
    assert pooled.results == [0, 2, 4, 6, None, None, None, None, None, None]
    assert pooled.late == set()


def test_work_in_flight_at_the_deadline_is_cancelled_and_late() -> None:
    clock = FakeClock()
    cancelled: list[int] = []

    async def work(index: int) -> int:
        if index == 0:
            return 0
        clock.now = 100.0  # the deadline passes while this one waits
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(index)
            raise
        return index

    pooled = asyncio.run(within_deadline(1000, work, 3, 50.0, clock))
    # One worker took node 0 (no wait) and then node 1, where the deadline passed.
    assert pooled.results[0] == 0
    assert pooled.results[1:] == [None] * 999
    assert pooled.late == {1}  # the other two workers found the deadline passed
    assert cancelled == [1]


def test_no_more_tasks_than_the_concurrency() -> None:
    most = 0

    async def work(index: int) -> int:
        nonlocal most
        most = max(most, len(asyncio.all_tasks()))
        await asyncio.sleep(0)
        return index

    pooled = asyncio.run(within_deadline(5000, work, 16, 3600.0))
    assert pooled.results == list(range(5000))
    assert most == 16 + 1  # the workers and the main task


@pytest.fixture
def silent_agent() -> Iterator[str]:
    """A listener that completes every connection (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_nodes_not_asked_by_the_deadline_are_unjudged_not_failed(silent_agent: str) -> None:
    """The nodes asked and silent at the deadline fail; those never asked are an error
    (the deadline is ours): unjudged, not excluded, and the cluster is not ready."""
    urls = {f"n{i}": silent_agent for i in range(40)}
    settings = GatherSettings(concurrency=2, read_timeout_s=60, retries=0, deadline_s=0.5)
    summaries, failures = gather_agent(urls, settings)
    assert summaries == []
    reasons = {f.node: (f.status, f.reason) for f in failures}
    assert sorted(reasons) == sorted(urls)
    assert reasons["n0"] == reasons["n1"] == (
        Status.FAIL, "no answer within the gather's deadline (0.5 s)")
    assert {reasons[f"n{i}"] for i in range(2, 40)} == {(
        Status.ERROR, "not asked: clusterdiag's own gather deadline (0.5 s); raise "
        "cluster.deadline_s or cluster.concurrency")}
    report = judge(summaries, failures, ClusterSettings(), via="agent")
    assert report.bad_nodes == ["n0", "n1"]
    assert set(report.unjudged) == {f"n{i}" for i in range(2, 40)}
    data = report.to_dict()
    assert (data["bad_nodes"], data["unjudged_nodes"]) == ("n[0-1]", "n[2-39]")
    assert not report.ready


def test_a_cluster_with_nodes_never_asked_is_not_ready_and_excludes_none() -> None:
    """Every node asked answered; the rest were never asked: nothing to exclude, but the
    verdict is an error, not READY, and no pass says every node answered."""
    failures = [Unreachable("not asked: clusterdiag's own gather deadline (1 s); raise "
                            "cluster.deadline_s or cluster.concurrency", node=f"n{i}",
                            status=Status.ERROR) for i in (4, 5)]
    report = judge([], failures, ClusterSettings(), via="agent")
    assert (report.bad_nodes, report.unjudged) == ([], ["n4", "n5"])
    assert (report.ready, report.verdict) == (False, Status.ERROR)
    reach = [c for c in report.findings if c.finding.check == "cluster.reachability"]
    assert [(c.finding.status, c.nodes) for c in reach] == [(Status.ERROR, ("n4", "n5"))]
    assert "NOT READY" in render_terminal(report)
    assert "unjudged, not asked (2): n[4-5]" in render_terminal(report)
