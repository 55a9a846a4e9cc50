"""``ib.error_rate``'s "two link downs within an hour fail", as the agent feeds it: the
hour of link_downed checkpoints (agent/daemon/ibwindow.py) passed through ctx.history."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from clusterdiag.agent.daemon.ibwindow import CHECKPOINT_S, WINDOW_S, IbWindow
from clusterdiag.agent.model import Snapshot
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.finding import Finding, Status
from clusterdiag.checks.ib_rates import LINK_DOWNED_HISTORY
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import CheckContext
from tests.unit.test_ib_checks import _eight, _snap

PORT = "mlx5_3/1"


def _judge(snap: Snapshot, previous: Snapshot, history: dict[str, Any]) -> list[Finding]:
    spec = REGISTRY["ib.error_rate"]
    ctx = CheckContext(snapshot=snap, profile=load_profile("dgx-h100"), params=dict(spec.params),
                       level="full", now=snap.taken_at, previous=previous, history=history)
    return [f for f in spec.func(ctx) if f.component == PORT]


def _at(t: float, link_downed: int) -> Snapshot:
    devs = _eight()
    devs[3].ports[0].counters["link_downed"] = link_downed
    return _snap(devs, 1000.0 + t)


def _agent_cycles(downs_at: list[float], until: float, step: float = 30.0
                  ) -> tuple[list[Finding], list[Finding]]:
    """Run the agent's sampling every ``step`` s with a link down at each of ``downs_at``:
    the last verdict with the window, and without it (the previous interval only)."""
    window, previous = IbWindow("n1"), None
    with_window: list[Finding] = []
    without: list[Finding] = []
    t = 0.0
    while t <= until:
        snap = _at(t, sum(1 for d in downs_at if d <= t))
        if previous is not None:
            with_window = _judge(snap, previous, window.history(snap.taken_at))
            without = _judge(snap, previous, {})
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
    {},
    {LINK_DOWNED_HISTORY: {"taken_at": 1000.0 - WINDOW_S - 1, "counters": {PORT: 0}}},
    {LINK_DOWNED_HISTORY: {"taken_at": 1290.0, "counters": {PORT: 0}}},  # after previous
    {LINK_DOWNED_HISTORY: {"taken_at": 1000.0, "counters": {PORT: "0"}}},
    {LINK_DOWNED_HISTORY: {"taken_at": "x", "counters": {PORT: 0}}},
    {LINK_DOWNED_HISTORY: ["not", "a", "mapping"]},
])
def test_without_a_usable_window_the_previous_interval_is_judged(
        history: dict[str, Any]) -> None:
    """A base 2 downs back that is too old, newer than the previous sample or malformed
    changes nothing: one down in the last interval warns, as in a one-shot run."""
    found = _judge(_at(300.0, 2), _at(270.0, 1), history)
    assert [f.status for f in found] == [Status.WARN]
    assert found[0].observed["seconds"] == pytest.approx(30.0)


def test_checkpoints_are_spaced_and_rolled_forward() -> None:
    window = IbWindow("n1")
    for t in range(0, 7500, 30):
        window.add(_at(float(t), 0))
    times = [s["taken_at"] - 1000.0 for s in window.samples]
    assert len(times) <= WINDOW_S / CHECKPOINT_S + 1
    assert all(b - a >= CHECKPOINT_S for a, b in itertools.pairwise(times))
    now = 1000.0 + 7500
    base = window.base(now)
    assert base is not None
    assert WINDOW_S - CHECKPOINT_S - 30 <= now - base["taken_at"] <= WINDOW_S
    assert base["counters"][PORT] == 0


def test_no_ib_counters_add_no_checkpoint() -> None:
    window = IbWindow("n1")
    assert not window.add(Snapshot(node="n1", taken_at=1000.0))
    assert window.history(1030.0) == {}


def test_saved_window_round_trip_and_refusals(caplog: pytest.LogCaptureFixture) -> None:
    window = IbWindow("n1")
    window.add(_at(0.0, 3))
    saved = copy.deepcopy(window.to_dict())
    assert IbWindow.from_dict(saved, "n1").samples == window.samples
    assert IbWindow.from_dict(saved, "n2").samples == []  # another node's state dir
    assert IbWindow.from_dict(None, "n1").samples == []
    for bad in ([1, 2], {"node": "n1", "samples": [{"taken_at": True, "counters": {}}]},
                {"node": "n1", "samples": [{"taken_at": 1.0, "counters": {PORT: "3"}}]}):
        assert IbWindow.from_dict(bad, "n1").samples == []
    assert "state_corrupt" in caplog.text
