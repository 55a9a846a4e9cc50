"""An XID storm: events written a burst at a time, each reaching gpu.xid and report.json
within 2 s, and no collection started per event (the last one is judged again)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.integration.daemon_helpers import AgentProc

# Two bursts of eight (every GPU at the same moment), long after the first collection.
SPEC = {"nodes": [{"names": "n1", "profile": "dgx-h100"}],
        "faults": [{"node": "n1", "kind": "xid", "gpu": gpu, "code": code, "at_s": at}
                   for at, code in ((6.0, 79), (8.0, 48)) for gpu in range(8)]}


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
        assert _failing_gpus(agent.state) == set()
        agent.wait_log("event=xid_recorded", timeout=30)
        seen = time.monotonic()
        while not _failing_gpus(agent.state) and time.monotonic() - seen < 2.0:
            time.sleep(0.02)
        assert _failing_gpus(agent.state), "no gpu.xid fail in report.json 2 s after the event"
        deadline = time.monotonic() + 30
        while agent.log().count("event=xid_recorded") < 16 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        log = agent.log()
        assert log.count("event=xid_recorded") == 16, log
        assert log.count("event=collected") == 1, log  # the first collection, nothing more
        # Each flush is one write of events.json and one judging; a burst of eight
        # arrives together, so there are far fewer flushes than events.
        assert 1 <= log.count("event=rejudged") <= 8, log
        assert _failing_gpus(agent.state) == {f"gpu{i}" for i in range(8)}
        saved = json.loads((agent.state / "events.json").read_text())["events"]
        assert len(saved) == 16
    finally:
        assert agent.stop() == 0
