"""Starting a real ``clusterdiag agent`` process on loopback for the daemon tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

# How long a test waits for something the agent is expected to do: a guard against a hang,
# not a speed bound. A loaded 2-core CI machine can take seconds to start the interpreter
# and more for a simulated dgx-h100's first collection.
WAIT_S = 60.0

XID_SPEC = {
    "nodes": [{"names": "n1", "profile": "dgx-h100"}],
    "faults": [{"node": "n1", "kind": "xid", "gpu": 2, "code": 79, "at_s": 1.0}],
}


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


class AgentProc:
    """A running agent: its state dir (``tmp``/state unless ``state`` names another, as a
    node's own), its base URL once it listens, its stderr lines."""

    def __init__(self, tmp: Path, *args: str, config: dict[str, Any] | None = None,
                 spec: dict[str, Any] | str = "dgx-h100", interval: float = 1.0,
                 listen: str = "127.0.0.1:0", state: Path | None = None) -> None:
        self.state = state or tmp / "state"
        self.stderr_path = tmp / f"agent-{time.monotonic_ns()}.log"
        simulate = spec if isinstance(spec, str) else str(write_yaml(tmp / "spec.yaml", spec))
        argv = [sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate", simulate,
                "--interval", str(interval), "--state-dir", str(self.state), "--listen", listen,
                *args]
        if config is not None:
            argv += ["--config", str(write_yaml(tmp / "config.yaml", config))]
        self.stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.url = ""

    def wait_ready(self, timeout: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"agent exited {self.proc.returncode}: {self.log()}")
            agent = self.state / "agent.json"
            if agent.exists() and (self.state / "report.json").exists():
                meta = json.loads(agent.read_text())
                # files an earlier (killed) agent left in the same state dir are not ours:
                # this one writes agent.json, then its first report
                if meta.get("pid") == self.proc.pid and (self.state / "report.json").stat(
                        ).st_mtime_ns >= agent.stat().st_mtime_ns:
                    self.url = f"http://{meta['listen']}"
                    return self.url
            time.sleep(0.05)
        raise AssertionError(f"agent not ready: {self.log()}")

    def log(self) -> str:
        return self.stderr_path.read_text()

    def wait_log(self, text: str, timeout: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            exited = self.proc.poll() is not None
            log = self.log()
            if text in log:
                return log
            if exited:
                raise AssertionError(f"agent exited {self.proc.returncode} before it logged "
                                     f"{text!r}: {log}")
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not logged: {self.log()}")

    def is_up(self) -> bool:
        """This agent (not one killed before it in the same state dir) wrote agent.json:
        it has bound its port and is about to collect."""
        try:
            return bool(json.loads((self.state / "agent.json").read_text())["pid"]
                        == self.proc.pid)
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return False

    def wait_for(self, condition: Callable[[], bool], what: str,
                 timeout: float = WAIT_S) -> None:
        """Until ``condition()`` holds; fails naming ``what`` (with the agent's log) if the
        agent exits first or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.proc.poll() is None, f"agent exited before {what}: {self.log()}"
            assert time.monotonic() < deadline, f"no {what} in {timeout:.0f} s: {self.log()}"
            time.sleep(0.02)

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(WAIT_S)  # a clean stop ends its collection first
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(WAIT_S)
        self.stderr.close()
        return self.proc.returncode


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


def get(url: str, token: str | None = None, method: str = "GET", timeout: float = 10,
        headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)
