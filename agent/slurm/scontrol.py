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
# ``Reason=<text> [user@2026-11-30T00:57:43]``: the text may hold spaces and brackets. The
# bracket is the reason's user and time (ReasonTime), printed after the reason's first
# line only when Slurm has a time for it (SchedMD/slurm src/api/node_info.c,
# slurm_sprint_node_table(): ``xstrfmtcat(out, " [%s@%s]", user_name, time_str)`` with
# ``slurm_make_time_str(&node_ptr->reason_time, ...)``); a line of ``-o`` is one node.
_REASON = LazyPattern(r"(?:^|\s)Reason=(.*?)(?:\s\[[^\[\]@]*@([^\[\]]*)\])?\s*$")
_NODE_NAME = LazyPattern(r"NodeName=(\S+)\s")
# slurm_make_time_str() (src/common/parse_time.c) prints "%FT%T" in local time when
# SLURM_TIME_FORMAT is unset or "standard", any strftime format otherwise: the fleet view
# asks for "standard" so the time reads back whatever the site's environment says.
TIME_FORMAT = {"SLURM_TIME_FORMAT": "standard"}
# ``scontrol show node -o`` of the whole fleet: a line is about 1 KiB (the real 22.05
# line of test_prolog_slurm_text.py, with its GRES and TRES), so 64 MiB holds far more
# nodes than a Slurm cluster has.
MAX_FLEET_BYTES = 64 << 20
_START = LazyPattern(r"(?:^|\s)StartTime=(\S+)")


class SlurmError(Exception):
    """scontrol missing, refused, or silent: clusterdiag's trouble, not the node's."""


@record(frozen=True)
class NodeState:
    """``state`` as scontrol prints it (``IDLE+DRAIN``, ``MIXED``, ``DOWN*``)."""

    name: str
    state: str
    reason: str | None
    reason_time: float | None = None  # the epoch of ReasonTime, when Slurm printed one

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
    return _node(name, line)


def _node(name: str, line: str) -> NodeState:
    state = _STATE.search(line)
    if state is None:
        raise SlurmError(f"scontrol show node {name}: no State field")
    reason = _REASON.search(line)
    text_reason = reason[1].strip() if reason else ""
    at = _epoch(reason[2]) if reason and reason[2] else None
    return NodeState(name, state[1], text_reason or None, at if text_reason else None)


def parse_nodes(text: str) -> list[NodeState]:
    """Every node of ``scontrol show node -o`` (one line each); SlurmError when the answer
    names no node, or a node line lacks its State (not the answer we know)."""
    nodes = []
    for line in text.splitlines():
        found = _NODE_NAME.match(line)
        if found is not None:
            nodes.append(_node(found[1], line))
    if not nodes:
        raise SlurmError("scontrol show node: no node in the answer")
    return nodes


def _epoch(text: str) -> float | None:
    """A time slurm_make_time_str() printed in the standard form (local time), else None."""
    import datetime as dt  # datetime only to read a time Slurm printed

    try:
        return dt.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


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

    def _run(self, *args: str, max_bytes: int | None = None,
             extra_env: Mapping[str, str] | None = None) -> str:
        if self.program is None:
            where = self.configured or "PATH, next to SLURM_CONF or the standard directories"
            raise SlurmError(f"scontrol not found ({where})")
        timeout = self.timeout_s
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
        if timeout <= 0.05:
            raise SlurmError(f"scontrol {args[0]}: no time left in the budget")
        result = run_command([self.program, *args], timeout,
                             env={**self.environ, **(extra_env or {})}, max_bytes=max_bytes)
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

    def show_nodes(self) -> list[NodeState]:
        """Every node Slurm knows, in one call (``scontrol show node -o``, times in the
        standard form): what the gate counts fleet events and the circuit breaker on."""
        return parse_nodes(self._run("show", "node", "-o", max_bytes=MAX_FLEET_BYTES,
                                     extra_env=TIME_FORMAT))

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
