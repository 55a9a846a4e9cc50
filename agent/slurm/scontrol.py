"""Talking to Slurm through ``scontrol``: read a node's state, drain it, resume it.

Prologs and health checks run with no PATH (and a health check without SLURM_CONF), so
the program is found by absolute path: the configured one, the ``bin`` next to the
directory holding SLURM_CONF (``/opt/slurm/etc/slurm.conf`` -> ``/opt/slurm/bin``), then
the directories distributions install into. Every call has its own timeout (3 s by
default): at slurmd start the health check runs before the node registers and an
unbounded scontrol would hang until Slurm kills it (mej/nhc#159). Never a shell: the
reason is one argv element, whatever it contains.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from ..base.lazy_re import LazyPattern
from ..model.record import record
from ..read.sources import find_program, run_command

DEFAULT_TIMEOUT_S = 3.0
_EXTRA_DIRS = ("/opt/slurm/bin", "/usr/local/slurm/bin")
_STATE = LazyPattern(r"(?:^|\s)State=(\S+)")
# ``Reason=<text> [user@2026-11-30T00:57:43]``: the text may hold spaces and brackets.
_REASON = LazyPattern(r"(?:^|\s)Reason=(.*?)(?:\s\[[^\[\]@]*@[^\[\]]*\])?\s*$")
_START = LazyPattern(r"(?:^|\s)StartTime=(\S+)")


class SlurmError(Exception):
    """scontrol missing, refused, or silent: clusterdiag's trouble, not the node's."""


@record(frozen=True)
class NodeState:
    """``state`` as scontrol prints it (``IDLE+DRAIN``, ``MIXED``, ``DOWN*``)."""

    name: str
    state: str
    reason: str | None

    @property
    def flags(self) -> set[str]:
        return {part.rstrip("*~#!%$@^-") for part in self.state.upper().split("+")}

    @property
    def drained(self) -> bool:
        """Drained, draining, down or failing: any state that keeps new jobs away."""
        return bool(self.flags & {"DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING"})


def parse_node(name: str, text: str) -> NodeState:
    """One node from ``scontrol show node NAME -o`` (one line of key=value fields)."""
    line = next((ln for ln in text.splitlines() if ln.startswith(f"NodeName={name} ")), None)
    if line is None:
        raise SlurmError(f"scontrol show node {name}: node not in the answer")
    state = _STATE.search(line)
    if state is None:
        raise SlurmError(f"scontrol show node {name}: no State field")
    reason = _REASON.search(line)
    text_reason = reason[1].strip() if reason else ""
    return NodeState(name, state[1], text_reason or None)


def parse_job_start(text: str) -> float | None:
    """The epoch of ``StartTime=2026-11-30T00:57:44`` (Slurm prints local time)."""
    import datetime as dt  # datetime only to read a job's start time

    found = _START.search(text)
    if found is None:
        return None
    try:
        return dt.datetime.fromisoformat(found[1]).timestamp()
    except ValueError:
        return None  # "Unknown", "None"


def locate(configured: str | None, environ: Mapping[str, str]) -> str | None:
    if configured:
        return configured if os.path.isabs(configured) and os.access(configured, os.X_OK) \
            else None
    conf = environ.get("SLURM_CONF")
    if conf:
        base = os.path.dirname(os.path.dirname(os.path.abspath(conf)))
        candidate = os.path.join(base, "bin", "scontrol")
        if os.access(candidate, os.X_OK):
            return candidate
    found = find_program("scontrol", environ)
    if found:
        return found
    return next((p for d in _EXTRA_DIRS if os.access(p := os.path.join(d, "scontrol"),
                                                      os.X_OK)), None)


class Scontrol:
    """``deadline`` (monotonic) caps every call below its own timeout, so the caller's
    total budget holds even when slurmctld does not answer."""

    def __init__(self, configured: str | None = None, environ: Mapping[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, deadline: float | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.program = locate(configured, self.environ)
        self.configured = configured
        self.timeout_s = timeout_s
        self.deadline = deadline

    def _run(self, *args: str, max_bytes: int | None = None) -> str:
        if self.program is None:
            where = self.configured or "PATH, next to SLURM_CONF or the standard directories"
            raise SlurmError(f"scontrol not found ({where})")
        timeout = self.timeout_s
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
        if timeout <= 0.05:
            raise SlurmError(f"scontrol {args[0]}: no time left in the budget")
        result = run_command([self.program, *args], timeout, env=self.environ,
                             max_bytes=max_bytes)
        if result.returncode is None:
            raise SlurmError(f"scontrol {args[0]}: "
                             f"{(result.error or 'failed').removeprefix(self.program + ': ')}")
        if result.returncode != 0:
            said = (result.stderr or result.stdout).strip().splitlines()
            raise SlurmError(f"scontrol {' '.join(args[:2])}: exit {result.returncode}"
                             + (f": {said[-1]}" if said else ""))
        return result.stdout

    def show_node(self, name: str) -> NodeState:
        return parse_node(name, self._run("show", "node", name, "-o"))

    def job_start(self, job_id: str) -> float | None:
        return parse_job_start(self._run("show", "job", job_id, "-o"))

    def show_topology(self, max_bytes: int) -> str:
        """``scontrol show topology``: the default topology slurmctld runs (scontrol(1)),
        read no further than ``max_bytes``."""
        return self._run("show", "topology", max_bytes=max_bytes)

    def drain(self, name: str, reason: str) -> None:
        self._run("update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def resume(self, name: str) -> None:
        self._run("update", f"NodeName={name}", "State=RESUME")
