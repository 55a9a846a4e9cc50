"""An XID storm: events written a burst at a time, each reaching gpu.xid and report.json
without a collection started per event (the last one is judged again)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.integration.daemon_helpers import AgentProc

# Two bursts of eight (every GPU at the same moment), long after the first collection:
# seconds after the simulated node is built, and a loaded CI machine can take several
# for the agent's start-up and first collection.
SPEC = {"nodes": [{"names": "n1", "profile": "dgx-h100"}],
        "faults": [{"node": "n1", "kind": "xid", "gpu": gpu, "code": code, "at_s": at}
                   for at, code in ((15.0, 79), (17.0, 48)) for gpu in range(8)]}
EVERY_GPU = {f"gpu{i}" for i in range(8)}


def _failing_gpus(state: Path) -> set[str]:
    try:
        report = json.loads((state / "report.json").read_text())
    except (OSError, ValueError):
        return set()
    return {f["component"] for f in report["findings"]
            if f["check"] == "gpu.xid" and f["status"] == "fail"}


def test_an_xid_burst_is_one_write_and_reaches_the_report_without_a_collection(
        tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, spec=SPEC, interval=600)
    try:
        agent.wait_ready()
        assert "event=xid_recorded" not in agent.log(), "the burst came before the first report"
        assert _failing_gpus(agent.state) == set()
        agent.wait_log("event=xid_recorded")
        # interval 600: only judging the last collection again can bring it in
        agent.wait_for(lambda: bool(_failing_gpus(agent.state)), "gpu.xid fail in report.json")
        agent.wait_for(lambda: agent.log().count("event=xid_recorded") >= 16,
                       "16 events recorded")
        agent.wait_for(lambda: _failing_gpus(agent.state) == EVERY_GPU,
                       "gpu.xid fail on every GPU in report.json")
        time.sleep(1.0)  # time for a collection or a write per event, were there any
        log = agent.log()
        assert log.count("event=xid_recorded") == 16, log
        assert log.count("event=collected") == 1, log  # the first collection, nothing more
        # Each flush is one write of events.json and one judging; a burst of eight
        # arrives together, so there are far fewer flushes than events.
        assert 1 <= log.count("event=rejudged") <= 8, log
        assert _failing_gpus(agent.state) == EVERY_GPU
        saved = json.loads((agent.state / "events.json").read_text())["events"]
        assert len(saved) == 16
    finally:
        assert agent.stop() == 0
