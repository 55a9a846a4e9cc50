"""The agent on the real host path keeps timedatectl's answer for ``agent.keep_s``
(agent/daemon/commands.py): asked once over several collections; systemctl is asked every
collection, so a unit that fails is in the agent's next snapshot, long before the keep
time.

The agent reads a simulated DGX H100 tree through ``--root``, with the real command
runner; ``systemctl`` and ``timedatectl`` are scripts found first on PATH that log each
call; systemctl answers ``failed`` for every unit once a flag file exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.tree import write_tree

from .daemon_helpers import WAIT_S

KEEP_S = 300  # far beyond what the whole test takes on a loaded machine
SYSTEMCTL = """#!/bin/sh
echo call >> {calls}
state=active
[ -e {flag} ] && state=failed
after=0
for unit in "$@"; do
  if [ "$after" = 1 ]; then
    printf 'Id=%s\\nActiveState=%s\\nSubState=running\\nLoadState=loaded\\n\\n' "$unit" "$state"
  fi
  [ "$unit" = "--" ] && after=1
done
exit 0
"""
TIMEDATECTL = """#!/bin/sh
echo call >> {calls}
echo yes
"""


def _calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _services(state: Path) -> list[dict[str, Any]]:
    try:
        host = json.loads((state / "snapshot.json").read_text()).get("host") or {}
    except (FileNotFoundError, ValueError):
        return []
    return list(host.get("services") or [])


def _wait(condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path,
          timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"agent exited before {what}: {log.read_text()}"
        assert time.monotonic() < deadline, f"no {what} in {timeout:.0f} s: {log.read_text()}"
        time.sleep(0.05)


@pytest.mark.slow
def test_the_clocks_answer_is_kept_and_a_failed_unit_seen_at_the_next_collection(
        tmp_path: Path) -> None:
    root, state, bin_dir = tmp_path / "root", tmp_path / "state", tmp_path / "bin"
    write_tree(build(NodeSpec("n1", "dgx-h100")), root)
    bin_dir.mkdir()
    units, clock, flag = tmp_path / "units", tmp_path / "clock", tmp_path / "failed"
    for name, script, calls in (("systemctl", SYSTEMCTL, units),
                                ("timedatectl", TIMEDATECTL, clock)):
        program = bin_dir / name
        program.write_text(script.format(calls=calls, flag=flag))
        program.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"agent": {"keep_s": KEEP_S}}))
    log = tmp_path / "agent.log"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterdiag.agent", "agent", "--root", str(root),
             "--node", "n1", "--profile", "dgx-h100", "--interval", "0.2", "--state-dir",
             str(state), "--listen", "127.0.0.1:0", "--config", str(config)],
            stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
        try:
            _wait(lambda: log.read_text().count("event=collected") >= 4, "four collections",
                  proc, log)
            assert _calls(clock) == 1, log.read_text()
            assert _calls(units) >= 4, log.read_text()
            services = _services(state)
            assert services
            assert all(s["active"] == "active" for s in services), services
            flag.touch()
            started = time.monotonic()
            _wait(lambda: any(s["active"] == "failed" for s in _services(state)),
                  "failed unit in the snapshot", proc, log)
            # Seen without waiting for the keep time (WAIT_S is the load margin).
            assert time.monotonic() - started < KEEP_S, log.read_text()
            assert _calls(clock) == 1
        finally:
            proc.terminate()
            proc.wait(WAIT_S)
