"""The agent's long window of event counters (agent/daemon/counterwindow.py, handed to the
checks through ctx.history, checks/core/window.py), judged by feeding the agent many intervals:
InfiniBand link downs and link error recoveries, NVLink recoveries and replays."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable

import pytest

from clusterdiag.agent.daemon.counterwindow import CHECKPOINT_S, CounterWindow
from clusterdiag.agent.model import Snapshot
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.core.registry import History
from clusterdiag.checks.core.window import WINDOW_S
from tests.checks.harness import run_check
from tests.checks.ib.factory import eight_hcas, make_snap
from tests.checks.nvlink.factory import make_gpu, make_snapshot

PORT = "mlx5_3/1"


def _downs(n: object) -> dict[str, object]:
    return {"link_downed": n, "link_error_recovery": 0}


def _judge(snap: Snapshot, previous: Snapshot, history: History) -> list[Finding]:
    return [f for f in run_check("ib.error_rate", snap, profile="dgx-h100", level="full",
                                 previous=previous, history=history) if f.component == PORT]


def _at(t: float, link_downed: int, counter: str = "link_downed") -> Snapshot:
    devs = eight_hcas()
    devs[3].ports[0].counters[counter] = link_downed
    return make_snap(devs, 1000.0 + t)


Judge = Callable[[Snapshot, Snapshot, History], list[Finding]]


def _agent_cycles(downs_at: list[float], until: float, step: float = 30.0,
                  at: Callable[[float, int], Snapshot] = _at, judge: Judge = _judge
                  ) -> tuple[list[Finding], list[Finding]]:
    """Run the agent's sampling every ``step`` s with one event at each of ``downs_at``:
    the last verdict with the window, and without it (the previous interval only)."""
    window, previous = CounterWindow("n1"), None
    with_window: list[Finding] = []
    without: list[Finding] = []
    t = 0.0
    while t <= until:
        snap = at(t, sum(1 for d in downs_at if d <= t))
        if previous is not None:
            with_window = judge(snap, previous, window.history(snap.taken_at))
            without = judge(snap, previous, History())
        window.add(snap)
        previous, t = snap, t + step
    return with_window, without


def test_a_link_flapping_every_few_minutes_fails_in_the_agent() -> None:
    with_window, without = _agent_cycles([65.0, 415.0], until=420.0)
    assert [f.status for f in without] == [Status.WARN]  # the old verdict: warn forever
    assert [f.status for f in with_window] == [Status.FAIL]
    assert with_window[0].observed["events"] == 2
    assert with_window[0].observed["seconds"] == pytest.approx(420.0)  # since the first sample


def test_downs_more_than_an_hour_apart_only_warn() -> None:
    last = 30.0 * 142  # 4260 s: the second down lands in the last interval
    with_window, _ = _agent_cycles([65.0, last - 15.0], until=last)
    assert [f.status for f in with_window] == [Status.WARN]
    assert with_window[0].observed["events"] == 1


def test_one_down_within_the_hour_keeps_warning_after_the_interval() -> None:
    with_window, without = _agent_cycles([65.0], until=600.0)
    assert [f.status for f in without] == [Status.PASS]
    assert [f.status for f in with_window] == [Status.WARN]


@pytest.mark.parametrize("history", [
    History(),
    History({"taken_at": 1000.0 - WINDOW_S - 1, "counters": {PORT: _downs(0)}}),
    History({"taken_at": 1290.0, "counters": {PORT: _downs(0)}}),  # after previous
    History({"taken_at": 1000.0, "counters": {PORT: {"link_downed": "0"}}}),
    History({"taken_at": "x", "counters": {PORT: _downs(0)}}),
    History(["not", "a", "mapping"]),  # type: ignore[arg-type]  # a hostile file
])
def test_without_a_usable_window_the_previous_interval_is_judged(
        history: History) -> None:
    """A base 2 downs back that is too old, newer than the previous sample or malformed
    changes nothing: one down in the last interval warns, as in a one-shot run."""
    found = _judge(_at(300.0, 2), _at(270.0, 1), history)
    assert [f.status for f in found] == [Status.WARN]
    assert found[0].observed["seconds"] == pytest.approx(30.0)


def test_link_error_recoveries_minutes_apart_fail_in_the_agent() -> None:
    """One recovery every 4 minutes: each interval sees one (a warning); the agent's hour
    sees five, AzNHC's flapping limit."""
    recoveries = [65.0 + 240.0 * i for i in range(5)]
    def at(t: float, n: int) -> Snapshot:
        return _at(t, n, "link_error_recovery")
    with_window, without = _agent_cycles(recoveries, until=1100.0, at=at)
    assert [f.status for f in without] == [Status.PASS]  # none in the last interval
    assert [(f.status, f.action.value) for f in with_window] == [(Status.FAIL, "reseat_cable")]
    assert with_window[0].observed["events"] == 5
    assert with_window[0].observed["window"] == "agent"
    fewer, _ = _agent_cycles(recoveries[:2], until=1100.0, at=at)
    assert [f.status for f in fewer] == [Status.WARN]


def _nvlink_judge(platform: str) -> Judge:
    def judge(snap: Snapshot, previous: Snapshot, history: History) -> list[Finding]:
        return [f for f in run_check("nvlink.error_rate", snap, profile=platform, level="full",
                                     previous=previous, history=history)
                if f.component.startswith("gpu3")]
    return judge


def _nvlink_at(platform: str, counter: str) -> Callable[[float, int], Snapshot]:
    def at(t: float, n: int) -> Snapshot:
        gpus = [make_gpu(i, platform) for i in range(4)]
        gpus[3].nvlinks[7].errors[counter] = n
        return make_snapshot(platform, gpus, taken_at=1000.0 + t)
    return at


@pytest.mark.parametrize(("platform", "counter"), [
    ("dgx-h100", "recovery"), ("dgx-h100", "replay"), ("gb200-nvl72", "recovery")])
def test_an_nvlink_recovery_trickle_fails_in_the_agent(platform: str, counter: str) -> None:
    """+1 every 3 minutes (what preceded an Xid 149 NETIR_LINK_DOWN): never min_events in
    one 30 s interval, three in the agent's window."""
    trickle = [95.0 + 180.0 * i for i in range(3)]
    with_window, without = _agent_cycles(trickle, until=600.0, at=_nvlink_at(platform, counter),
                                         judge=_nvlink_judge(platform))
    assert [f.status for f in without] == [Status.PASS]
    assert [(f.status, f.component, f.action.value) for f in with_window] == [
        (Status.FAIL, "gpu3.link7", "reset_gpu")]
    assert with_window[0].observed["events"] == 3
    assert with_window[0].observed["seconds"] == pytest.approx(600.0)
    two, _ = _agent_cycles(trickle[:2], until=600.0, at=_nvlink_at(platform, counter),
                           judge=_nvlink_judge(platform))
    assert [f.status for f in two] == [Status.PASS]  # below min_events even over the hour


def test_checkpoints_are_spaced_and_rolled_forward() -> None:
    window = CounterWindow("n1")
    for t in range(0, 7500, 30):
        window.add(_at(float(t), 0))
    times = [s["taken_at"] - 1000.0 for s in window.samples]
    assert len(times) <= WINDOW_S / CHECKPOINT_S + 1
    assert all(b - a >= CHECKPOINT_S for a, b in itertools.pairwise(times))
    now = 1000.0 + 7500
    base = window.base(now)
    assert base is not None
    assert WINDOW_S - CHECKPOINT_S - 30 <= now - base["taken_at"] <= WINDOW_S
    assert base["counters"][PORT] == {"link_downed": 0, "link_error_recovery": 0}


def test_no_ib_counters_add_no_checkpoint() -> None:
    window = CounterWindow("n1")
    assert not window.add(Snapshot(node="n1", taken_at=1000.0))
    assert window.history(1030.0) == History()


def test_saved_window_round_trip_and_refusals(caplog: pytest.LogCaptureFixture) -> None:
    window = CounterWindow("n1")
    window.add(_at(0.0, 3))
    saved = copy.deepcopy(window.to_dict())
    assert CounterWindow.from_dict(saved, "n1").samples == window.samples
    assert CounterWindow.from_dict(saved, "n2").samples == []  # another node's state dir
    assert CounterWindow.from_dict(None, "n1").samples == []
    for bad in ([1, 2], {"node": "n1", "samples": [{"taken_at": True, "counters": {}}]},
                {"node": "n1", "samples": [{"taken_at": 1.0, "counters": {PORT: 3}}]},
                {"node": "n1", "samples": [{"taken_at": 1.0,
                                            "counters": {PORT: {"link_downed": "3"}}}]}):
        assert CounterWindow.from_dict(bad, "n1").samples == []
    assert "state_corrupt" in caplog.text
