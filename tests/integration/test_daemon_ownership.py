"""Root touching the agent's state must not cost the agent its sticky XID events.

Runs as root (as the suite does), with the state directory owned by ``nobody`` standing in
for ``User=clusterdiag``; the agent side runs under setpriv as that user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import users
from tests.conftest import run_cli
from tests.users import NOBODY

EVENT = {"id": "xid79-gpu2-1", "xid": 79, "gpu_index": 2, "gpu_uuid": None, "time": 1.0,
         "cleared": None}
KEEP = {**EVENT, "id": "xid48-gpu0-2", "xid": 48, "gpu_index": 0}

def as_nobody(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(users.as_nobody(*argv), capture_output=True, text=True,
                          timeout=timeout, check=False, cwd="/")


_WHY = users.why_nobody_cannot_run_clusterdiag()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


@pytest.fixture
def state() -> Iterator[Path]:
    """A state dir owned by nobody, reachable by nobody (pytest's tmp_path is root-only)."""
    base = Path(tempfile.mkdtemp(prefix="clusterdiag-owner-"))
    try:
        base.chmod(0o755)
        path = base / "state"
        (path / "clear").mkdir(parents=True, mode=0o750)
        (path / "events.json").write_text(json.dumps({"version": 1, "events": [EVENT, KEEP]}))
        for p in (path, path / "clear", path / "events.json"):
            os.chown(p, NOBODY, NOBODY)
        (path / "events.json").chmod(0o640)
        yield path
    finally:
        shutil.rmtree(base)


def _events_seen_by_nobody(state: Path) -> list[dict[str, object]]:
    done = as_nobody(sys.executable, "-c", (
        "import json, sys; from clusterdiag.agent.daemon.state import StateDir; "
        "print(json.dumps(StateDir(__import__('pathlib').Path(sys.argv[1]))"
        ".load_events().items))"), str(state))
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def test_root_clear_with_agent_stopped_leaves_the_file_to_the_agent(state: Path) -> None:
    done = run_cli("agent", "--state-dir", str(state), "--clear", EVENT["id"])
    assert done.returncode == 0, done.stderr
    info = (state / "events.json").stat()
    assert (info.st_uid, info.st_gid) == (NOBODY, NOBODY)
    seen = {e["id"]: e for e in _events_seen_by_nobody(state)}
    assert set(seen) == {EVENT["id"], KEEP["id"]}  # nothing lost: the agent can read it
    assert seen[EVENT["id"]]["cleared"]
    assert not seen[KEEP["id"]]["cleared"]


def test_agent_refuses_to_start_on_an_events_file_it_cannot_read(state: Path) -> None:
    events = state / "events.json"
    os.chown(events, 0, 0)  # what the unfixed --clear left: root:root 0640
    before = events.read_bytes()
    done = as_nobody(sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate",
                     "dgx-h100", "--state-dir", str(state), "--listen", "127.0.0.1:0",
                     "--interval", "1")
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "events.json" in lines[0]
    assert "Permission denied" in lines[0]
    assert "Traceback" not in done.stderr
    assert events.read_bytes() == before
    assert events.stat().st_uid == 0
