"""The agent keeps its hour of InfiniBand link_downed checkpoints in its state directory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.daemon_helpers import AgentProc


def test_agent_saves_link_downed_checkpoints(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path)
    try:
        agent.wait_ready()
        saved = json.loads((agent.state / "ib_window.json").read_text())
        report = json.loads((agent.state / "report.json").read_text())
    finally:
        assert agent.stop() == 0
    assert saved["node"] == report["node"]
    counters = saved["samples"][0]["counters"]
    assert counters
    assert all(isinstance(v, int) for v in counters.values())
    assert any(name.startswith("mlx5_") for name in counters)
