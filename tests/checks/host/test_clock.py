"""host.clock_sync (checks/host/clock.py)."""

from __future__ import annotations

from clusterdiag.agent.model.host import ClockSync, HostInfo
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.host.factory import judge, one


def test_clock_sync_states() -> None:
    synced = HostInfo("n1", clock=ClockSync("chronyc", True))
    assert one(judge("host.clock_sync", synced)).status is Status.PASS
    drifting = HostInfo("n1", clock=ClockSync("timedatectl", False, "no"))
    finding = one(judge("host.clock_sync", drifting))
    assert (finding.status, finding.action) == (Status.WARN, Action.FIX_CONFIG)


def test_clock_sync_skip_when_no_tool_error_when_one_hung() -> None:
    none = HostInfo("n1", clock=ClockSync(None, None, "timedatectl: not found"))
    assert one(judge("host.clock_sync", none)).status is Status.SKIP
    hung = HostInfo("n1", clock=ClockSync(None, None), unknown={"clock": "chronyc: no answer"})
    finding = one(judge("host.clock_sync", hung))
    assert finding.status is Status.ERROR
    assert finding.observed == "chronyc: no answer"
