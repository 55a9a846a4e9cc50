"""Writing the agent's state files, and what the agent does when the disk says no.

A full disk or a state directory remounted read-only after start must not kill the agent
or freeze its answers: the node's GPUs are no worse for it, and the prolog and Prometheus
still ask over HTTP. So a failed write is logged (once, when the trouble starts), counted
in the metrics, shown as an ``agent.state_dir`` warning in the report, and remembered: the
newest body of every file that could not be written is retried each tick until it lands,
and then the agent says so and collects again, so the report on disk is fresh.

One writer thread writes in submission order. A retry always writes the newest body ever
submitted for that file, so it can never put an older one back over a newer one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from ...checks.core.finding import Action, Finding, Status
from ...reports.model.node import NodeReport, iso
from .metrics import AgentView
from .state import StateDir

log = logging.getLogger("clusterdiag.agent")

CHECK = "agent.state_dir"


class Persister:
    def __init__(self, state: StateDir, view: AgentView) -> None:
        self.state, self.view = state, view
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="write")
        self._latest: dict[str, bytes] = {}  # newest body submitted, until it is on disk
        self._unsaved: set[str] = set()
        self.error: str | None = None  # while writes fail: the first failure, one line
        self.since: float | None = None

    @property
    def healthy(self) -> bool:
        return self.error is None

    async def write(self, name: str, body: bytes) -> bool:
        """Write ``name`` whole; False (logged, kept for retry) when the disk refuses."""
        self._latest[name] = body
        try:
            await asyncio.get_running_loop().run_in_executor(
                self._writer, self.state.write_bytes, name, body)
        except OSError as exc:
            self._failed(name, exc)
            return False
        if self._latest.get(name) is body:
            del self._latest[name]
            self._unsaved.discard(name)
        return True

    async def retry(self) -> bool:
        """Write what is still unsaved; True when that ended a spell of failed writes."""
        if self.healthy:
            return False
        for name in sorted(self._unsaved):
            body = self._latest.get(name)
            if body is not None and not await self.write(name, body):
                return False
        if self._unsaved:
            return False
        log.info("state_write_recovered", extra={"state_dir": str(self.state.path),
                                                 "failed_for_s": round(time.time() - (
                                                     self.since or time.time()), 1)})
        self.error, self.since = None, None
        self.view.state_writable = True
        return True

    def _failed(self, name: str, exc: OSError) -> None:
        self._unsaved.add(name)
        self.view.state_write_errors += 1
        self.view.state_writable = False
        if self.error is None:  # once per spell: a full disk must not also flood the journal
            self.error = f"{name}: {exc.strerror or exc}"
            self.since = time.time()
            log.error("state_write_failed", extra={
                "state_dir": str(self.state.path), "file": name, "error": exc.strerror or str(
                    exc), "errno": exc.errno, "serving": "from memory, retrying every tick"})

    def annotate(self, report: NodeReport) -> None:
        """While writes fail, the report says so: an operator reading it (or a gather of
        many nodes) learns why the node's state files are stale."""
        if self.error is None:
            return
        report.findings.append(Finding(
            Status.WARN, "node", "clusterdiag agent cannot write its state directory; "
            "serving from memory", observed={"state_dir": str(self.state.path),
                                             "error": self.error, "since": iso(self.since or 0)},
            expected="a writable state directory with free space", action=Action.INVESTIGATE,
            check=CHECK))
        report.findings.sort(key=lambda f: (-f.status.rank, f.check, f.component))

    def shutdown(self) -> None:
        self._writer.shutdown(wait=True)
