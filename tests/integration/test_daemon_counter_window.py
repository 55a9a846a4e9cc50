"""The agent keeps its hour of event-counter checkpoints in its state directory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.daemon_helpers import AgentProc


def test_agent_saves_ib_and_nvlink_checkpoints(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path)
    try:
        agent.wait_ready()
        saved = json.loads((agent.state / "counter_window.json").read_text())
        report = json.loads((agent.state / "report.json").read_text())
    finally:
        assert agent.stop() == 0
    assert saved["node"] == report["node"]
    counters = saved["samples"][0]["counters"]
    ib = {comp: values for comp, values in counters.items() if comp.startswith("mlx5_")}
    nvlink = {comp: values for comp, values in counters.items() if ".link" in comp}
    assert ib
    assert nvlink
    assert all(set(v) == {"link_downed", "link_error_recovery"} for v in ib.values())
    assert all(set(v) <= {"replay", "recovery", "recovery_failed"} and v
               for v in nvlink.values())
    assert all(isinstance(n, int) for v in counters.values() for n in v.values())
