"""The agent reads the previous boot's kernel log at its start: a fatal hardware error
record that took the tray down fails host.cper in the agent's report until the operator
clears it, and stays cleared when the agent starts again within the same boot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_cli
from tests.integration.daemon_helpers import AgentProc, get

SPEC = {"nodes": [{"names": "t01", "profile": "gb200-nvl72", "rack": "rack1"}],
        "faults": [{"node": "t01", "kind": "cper_fatal_previous_boot"}]}


def _cper(url: str) -> list[dict[str, Any]]:
    report = json.loads(get(f"{url}/v1/report")[1])
    return [f for f in report["findings"] if f["check"] == "host.cper"]


def test_fatal_record_of_the_previous_boot_fails_until_cleared(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, spec=SPEC, interval=0.5)
    try:
        url = agent.wait_ready()
        agent.wait_log("event=previous_boot_read")
        (finding,) = _cper(url)
        assert finding["status"] == "fail", finding
        assert finding["component"] == "memory.node0.card0.module3"
        assert "in the previous boot (at " in finding["message"]
        event_id = finding["observed"]["event"]
        done = run_cli("agent", "--state-dir", str(agent.state), "--clear", event_id)
        assert done.returncode == 0, done.stderr
        agent.wait_for(lambda: [f["status"] for f in _cper(url)] == ["pass"],
                       "host.cper passing once the record is cleared")
    finally:
        assert agent.stop() == 0
    events = json.loads((agent.state / "events.json").read_text())["events"]
    assert [(e["kind"], bool(e["cleared"])) for e in events] == [("cper", True)]
