"""kill -9 at any moment loses no recorded event and leaves state the agent can read."""

from __future__ import annotations

import json
import random
import re
import signal
import time
from pathlib import Path

import pytest

from tests.integration.daemon_helpers import WAIT_S, AgentProc

# An XID every 0.1 s on rotating GPUs, and a collection every 0.1 s: the agent is almost
# always writing something when it is killed.
SPEC = {"nodes": [{"names": "n1", "profile": "dgx-h100"}],
        "faults": [{"node": "n1", "kind": "xid", "gpu": i % 8, "code": 48 if i % 2 else 79,
                    "at_s": round(0.2 + 0.1 * i, 2)} for i in range(30)]}


@pytest.mark.slow
def test_kill_9_mid_write_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(5)
    recorded: set[str] = set()
    for round_ in range(8):
        agent = AgentProc(tmp_path, spec=SPEC, interval=0.1)
        # killed while it records events and collects, however long a loaded machine
        # took to start it: counted from its first recorded event, not from its launch
        agent.wait_log("event=xid_recorded ")
        time.sleep(rng.uniform(0.0, 1.0))
        agent.signal(signal.SIGKILL)
        agent.proc.wait(WAIT_S)
        agent.stop()
        log = agent.log()
        recorded |= set(re.findall(r"event=xid_recorded id=(\S+)", log))
        assert "Traceback" not in log
        assert "state_corrupt" not in log, log
        for name in ("events.json", "report.json", "snapshot.json", "agent.json"):
            path = agent.state / name
            if path.exists():
                json.loads(path.read_text())  # never half-written
        saved = json.loads((agent.state / "events.json").read_text())["events"] \
            if (agent.state / "events.json").exists() else []
        missing = recorded - {e["id"] for e in saved}
        assert not missing, f"round {round_}: lost {missing}"
    assert len(recorded) >= 8  # every round recorded events before it was killed
    agent = AgentProc(tmp_path, spec=SPEC, interval=0.5)
    try:
        agent.wait_ready()
        log = agent.wait_log("event=collected")
        assert "state_corrupt" not in log
        assert "state_events_dropped" not in log
    finally:
        assert agent.stop() == 0
    assert not list(agent.state.glob(".tmp-*"))  # leftovers of killed writers swept
